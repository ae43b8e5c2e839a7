"""Plan, then apply: every file operation is computed first, then written as one transaction.

A `Plan` holds the new content of every created or patched file. `diff()` renders the whole change
as one unified diff (what `--dry-run` prints; `git apply` accepts it). `apply()` checks that nothing
changed since planning, writes through temp files, and on any failure restores every touched file
byte for byte and removes created files and folders.
"""

from __future__ import annotations

import difflib
import os
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from omnitts.scaffold.errors import ScaffoldError

CONFLICT_MARKERS = ("<<<<<<< ", ">>>>>>> ")


@dataclass(frozen=True)
class FileOp:
    """One file's change: `old is None` creates it; otherwise it is patched from `old` to `new`."""

    rel: str
    new: str
    old: str | None = None
    reason: str = ""

    @property
    def is_noop(self) -> bool:
        return self.old == self.new

    def diff(self) -> str:
        old_lines = [] if self.old is None else self.old.splitlines(keepends=True)
        new_lines = self.new.splitlines(keepends=True)
        a = "/dev/null" if self.old is None else f"a/{self.rel}"
        lines = list(difflib.unified_diff(old_lines, new_lines, fromfile=a, tofile=f"b/{self.rel}"))
        fixed = []
        for line in lines:  # `git apply` needs "\ No newline" markers for files without a final newline
            fixed.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
        return "".join(fixed)


@dataclass
class Plan:
    root: Path
    ops: list[FileOp] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    def add(self, op: FileOp) -> None:
        if any(o.rel == op.rel for o in self.ops):
            raise ScaffoldError(f"internal error: two operations on {op.rel}")
        self.ops.append(op)

    @property
    def changes(self) -> list[FileOp]:
        return [op for op in self.ops if not op.is_noop]

    def diff(self) -> str:
        return "".join(op.diff() for op in sorted(self.changes, key=lambda o: o.rel))

    def summary(self) -> str:
        created = sum(op.old is None for op in self.changes)
        patched = len(self.changes) - created
        return f"{created} file(s) created, {patched} file(s) patched"

    def apply(self, *, fail_after: int | None = None) -> list[Path]:
        """Write every change or none. `fail_after` injects a failure (tests prove the rollback)."""
        changes = self.changes
        for op in changes:
            _check_unchanged(self.root / op.rel, op)
        backups: list[tuple[Path, bytes | None]] = []
        created_dirs: list[Path] = []
        try:
            for i, op in enumerate(changes):
                if fail_after is not None and i >= fail_after:
                    raise OSError(f"injected failure before writing {op.rel}")
                path = self.root / op.rel
                backups.append((path, path.read_bytes() if path.exists() else None))
                created_dirs += _make_parents(path.parent)
                _atomic_write(path, op.new)
        except BaseException as exc:
            for path, data in reversed(backups):
                if data is None:
                    path.unlink(missing_ok=True)
                else:
                    path.write_bytes(data)
            for d in reversed(created_dirs):
                try:
                    d.rmdir()
                except OSError:
                    pass
            if isinstance(exc, OSError):
                raise ScaffoldError(f"could not write {exc.filename or ''} ({exc.strerror or exc}); tree restored") from exc
            raise
        return [self.root / op.rel for op in changes]


def _check_unchanged(path: Path, op: FileOp) -> None:
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if current != op.old:
        state = "appeared" if op.old is None else "changed"
        raise ScaffoldError(f"{op.rel} {state} since the plan was made; nothing written")
    if op.old is not None and not is_writable(path):
        raise ScaffoldError(f"{op.rel} is read-only; nothing written")


def _make_parents(directory: Path) -> list[Path]:
    missing = []
    d = directory
    while not d.exists():
        missing.append(d)
        d = d.parent
    for m in reversed(missing):
        m.mkdir()
    return list(reversed(missing))  # outermost first, so rollback removes innermost first


def _atomic_write(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".omnitts")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        elif path.suffix == ".sh":
            os.chmod(tmp, 0o755)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_for_patch(root: Path, rel: str) -> str:
    """Read a shared file that a codemod will patch, refusing states the patch must not touch."""
    path = root / rel
    if not path.is_file():
        raise ScaffoldError(f"{rel} not found in {root}")
    text = path.read_text(encoding="utf-8")
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(CONFLICT_MARKERS):
            raise ScaffoldError(f"{rel}:{n} has a merge-conflict marker; resolve the conflict first")
    if not is_writable(path):
        raise ScaffoldError(f"{rel} is read-only; nothing written")
    return text


def is_writable(path: Path) -> bool:
    """Writable by us *and* not marked read-only: root ignores permission bits, the user's intent stands."""
    return os.access(path, os.W_OK) and bool(path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
