"""Plan, then apply: every file operation is computed first, then written as one transaction.

A `Plan` holds the new content of every created, patched or deleted file. `diff()` renders the whole
change as one unified diff (what `--dry-run` prints; `git apply` accepts it). `apply()` checks that
nothing changed since planning, writes through temp files, and on any failure restores every touched
file byte for byte, removes created files and folders and restores deleted ones. Folders that a
deletion leaves empty are removed (`remove` leaves no empty model folder behind).
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
    """One file's change: `old is None` creates it, `new is None` deletes it, else `old` -> `new`."""

    rel: str
    new: str | None
    old: str | None = None
    reason: str = ""

    @property
    def is_noop(self) -> bool:
        return self.old == self.new

    @property
    def is_delete(self) -> bool:
        return self.new is None and self.old is not None

    def diff(self) -> str:
        old_lines = [] if self.old is None else self.old.splitlines(keepends=True)
        new_lines = [] if self.new is None else self.new.splitlines(keepends=True)
        a = "/dev/null" if self.old is None else f"a/{self.rel}"
        b = "/dev/null" if self.new is None else f"b/{self.rel}"
        lines = list(difflib.unified_diff(old_lines, new_lines, fromfile=a, tofile=b))
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
        deleted = sum(op.is_delete for op in self.changes)
        patched = len(self.changes) - created - deleted
        text = f"{created} file(s) created, {patched} file(s) patched"
        return text + (f", {deleted} file(s) deleted" if deleted else "")

    def apply(self, *, fail_after: int | None = None) -> list[Path]:
        """Write every change or none. `fail_after` injects a failure (tests prove the rollback)."""
        changes = self.changes
        for op in changes:
            _check_unchanged(self.root / op.rel, op)
        backups: list[tuple[Path, bytes | None, int | None]] = []
        created_dirs: list[Path] = []
        removed_dirs: list[Path] = []
        try:
            for i, op in enumerate(changes):
                if fail_after is not None and i >= fail_after:
                    raise OSError(f"injected failure before writing {op.rel}")
                path = self.root / op.rel
                exists = path.exists()
                backups.append((path, path.read_bytes() if exists else None, path.stat().st_mode if exists else None))
                if op.is_delete:
                    path.unlink()
                    continue
                created_dirs += _make_parents(path.parent)
                _atomic_write(path, op.new)
            for op in changes:
                if op.is_delete:
                    removed_dirs += _prune_empty_parents(self.root, (self.root / op.rel).parent)
        except BaseException as exc:
            for d in removed_dirs:
                d.mkdir(parents=True, exist_ok=True)
            for path, data, mode in reversed(backups):
                if data is None:
                    path.unlink(missing_ok=True)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(data)
                    if mode is not None:
                        os.chmod(path, mode & 0o7777)
            for d in reversed(created_dirs):
                try:
                    d.rmdir()
                except OSError:
                    pass
            if isinstance(exc, OSError):
                raise ScaffoldError(
                    f"could not write {exc.filename or ''} ({exc.strerror or exc}); tree restored"
                ) from exc
            raise
        return [self.root / op.rel for op in changes]


def _prune_empty_parents(root: Path, directory: Path) -> list[Path]:
    """Remove `directory` and its parents below `root` while they are empty (bytecode caches count as empty)."""
    removed = []
    d = directory
    while d != root and root in d.parents and d.is_dir():
        cache = d / "__pycache__"
        if cache.is_dir() and all(p.suffix == ".pyc" for p in cache.iterdir()):
            for p in cache.iterdir():
                p.unlink()
            cache.rmdir()
        if any(d.iterdir()):
            break
        d.rmdir()
        removed.append(d)
        d = d.parent
    return list(reversed(removed))  # outermost first, so rollback recreates parents first


def _check_unchanged(path: Path, op: FileOp) -> None:
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if current != op.old:
        state = "appeared" if op.old is None else "disappeared" if current is None else "changed"
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
