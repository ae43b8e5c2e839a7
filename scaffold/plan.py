"""Plan, then apply: every file operation is computed first, then written as one transaction.

A `Plan` holds the new content of every created, patched or deleted file. `diff()` renders the whole
change as one unified diff (what `--dry-run` prints; `git apply` accepts it). `apply()` checks that
nothing changed since planning and writes the changes as one journaled transaction (`journal.py`):
on any failure, in this run or after a kill in the next one, every touched file is restored byte for
byte, created files and folders are removed and deleted ones restored. Folders that a deletion leaves
empty are removed (`remove` leaves no empty model folder behind).
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from omnitts.scaffold import journal
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
    command: str = ""  # what the journal names when another run has to settle an interrupted apply

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
        """Write every change or none, as one journaled transaction (`scaffold/journal.py`).

        The check that every file is still as planned and the writes happen under one tree lock: a
        command that wrote the tree after this plan was made makes this one refuse, never lose its
        change. `fail_after` injects a failure before change i (tests prove the rollback)."""
        changes = self.changes
        with journal.tree_lock(self.root):
            for op in changes:
                _check_unchanged(self.root / op.rel, op)
            return journal.apply_changes(
                self.root,
                [journal.Change(op.rel, op.new) for op in changes],
                command=self.command,
                fail_after=fail_after,
            )


def read_text(path: Path) -> str:
    """A file's text exactly as stored: its line endings kept (`\\r\\n` stays `\\r\\n`)."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def line_ending(text: str, rel: str) -> str:
    """`\\n` or `\\r\\n`, the file's one line ending; mixed ones are refused (which would a new line get?)."""
    crlf = text.count("\r\n")
    if crlf == 0 and "\r" not in text:
        return "\n"
    if crlf == text.count("\n") == text.count("\r"):
        return "\r\n"
    raise ScaffoldError(
        f"{rel} mixes line endings (\\r\\n, \\n or a lone \\r); the scaffold writes a file's own line ending"
        " and cannot tell which that is: make them one kind first; nothing written"
    )


def keeping_line_endings(text: str, rel: str, edit: Callable[[str], str]) -> str:
    """`edit` (written for `\\n` text) applied to `text`, whose `\\r\\n` line endings come back as they were."""
    if line_ending(text, rel) == "\n":
        return edit(text)
    return edit(text.replace("\r\n", "\n")).replace("\n", "\r\n")


def _check_unchanged(path: Path, op: FileOp) -> None:
    current = read_text(path) if path.exists() else None
    if current != op.old:
        state = "appeared" if op.old is None else "disappeared" if current is None else "changed"
        raise ScaffoldError(f"{op.rel} {state} since the plan was made; nothing written")
    if op.old is not None and not is_writable(path):
        raise ScaffoldError(f"{op.rel} is read-only; nothing written")


def read_for_patch(root: Path, rel: str) -> str:
    """Read a shared file that a codemod will patch, refusing states the patch must not touch."""
    path = root / rel
    if not path.is_file():
        raise ScaffoldError(f"{rel} not found in {root}")
    text = read_text(path)
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith(CONFLICT_MARKERS):
            raise ScaffoldError(f"{rel}:{n} has a merge-conflict marker; resolve the conflict first")
    if not is_writable(path):
        raise ScaffoldError(f"{rel} is read-only; nothing written")
    return text


def is_writable(path: Path) -> bool:
    """Writable by us *and* not marked read-only: root ignores permission bits, the user's intent stands."""
    return os.access(path, os.W_OK) and bool(path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
