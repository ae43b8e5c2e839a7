"""The write-ahead journal that makes applying a plan one transaction, even across a kill or a power cut.

Before the first write into the tree, the journal (`.git/omnitts-journal/` when the tree is a git
checkout, else `.omnitts-journal/` at its root) records every intended change (create, replace,
delete; the temp file each write goes through; the folders it creates) and a copy of every file it
will replace or delete, with the file's mode. The journal is built under a `.new` name, fsynced and
renamed into place, so it exists whole or not at all. Then each file is written to its temp file,
fsynced and renamed over the target; deletions unlink. When every change is in place, the journal is
renamed to `.done` (the commit point) and deleted.

Whoever finds a journal first settles it (`recover`, run by every command before anything else):
`.new` means nothing was written yet, so it is deleted; `.done` means every change was written, so the
transaction is finished by deleting it; a live journal is rolled back. Rollback moves each backup
back over its file (a rename writes no data, so it works on a full disk), unlinks created files and
temp files, removes created folders, and carries on past individual errors; what it could not restore
is reported and the journal is kept, so the next command tries again. Every step is idempotent: a
backup still in the journal has not been restored yet, one that is gone has.

Every mutating call goes through `faults.point`, which the fault-injection tests use to stop or fail
the process at each step.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from omnitts.scaffold import faults
from omnitts.scaffold.errors import ScaffoldError

VERSION = 1
TEMP_SUFFIX = ".omnitts-tmp"


@dataclass(frozen=True)
class Change:
    """One file's intended change; `text is None` deletes it."""

    rel: str
    text: str | None


@dataclass
class Paths:
    """Where a tree's journal lives, in its three states."""

    home: Path
    live: Path
    new: Path
    done: Path

    @classmethod
    def of(cls, root: Path) -> Paths:
        home, stem = _git_dir(root), "omnitts-journal"
        if home is None:
            home, stem = root, ".omnitts-journal"
        return cls(home, home / stem, home / f"{stem}.new", home / f"{stem}.done")

    def any(self) -> bool:
        return self.live.exists() or self.new.exists() or self.done.exists()


def _git_dir(root: Path) -> Path | None:
    """The tree's own git directory (a worktree's `.git` file points to it), None when there is none."""
    dot = root / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        text = dot.read_text(encoding="utf-8", errors="replace").strip()
        if text.startswith("gitdir:"):
            target = Path(text.removeprefix("gitdir:").strip())
            target = target if target.is_absolute() else root / target
            if target.is_dir():
                return target
    return None


# -- file operations (each one a fault point) ---------------------------------------------------------


def _mkdir(path: Path) -> None:
    faults.point("mkdir", path)
    os.mkdir(path)


def _write(path: Path, data: bytes, mode: int) -> None:
    """Create or truncate `path` with `data`, fsynced, with `mode`."""
    faults.point("write", path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(path, mode)


def _replace(src: Path, dst: Path) -> None:
    faults.point("replace", dst)
    os.replace(src, dst)


def _unlink(path: Path) -> bool:
    """Unlink; False when it was not there (rollback and cleanup are idempotent)."""
    if not os.path.lexists(path):
        return False
    faults.point("unlink", path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def _rmdir(path: Path) -> None:
    faults.point("rmdir", path)
    os.rmdir(path)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems cannot fsync a folder; the data is synced already
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# The trees whose lock this process holds: path -> (pid, depth). A command holds its tree's lock from
# planning to the last write and the transaction takes it again inside (flock on a second descriptor of
# the same folder would refuse our own process). The pid keeps a forked child from inheriting the claim.
_HELD: dict[str, tuple[int, int]] = {}


@contextlib.contextmanager
def tree_lock(root: Path) -> Iterator[None]:
    """One writer per tree: an advisory lock on the tree's folder (released by the kernel on any exit).

    Re-entrant within one process, so that the plan's reads, its unchanged-check and its writes can all
    happen under the one lock the command took first."""
    key = os.path.realpath(root)
    pid, depth = _HELD.get(key, (None, 0))
    if pid == os.getpid():
        _HELD[key] = (pid, depth + 1)
        try:
            yield
        finally:
            _HELD[key] = (pid, depth)
        return
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise ScaffoldError(f"cannot lock {root} for writing: {_describe_error(exc)}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise ScaffoldError(
                f"another omnitts-scaffold command is writing {root}; run this one when it ends"
            ) from exc
        _HELD[key] = (os.getpid(), 1)
        try:
            yield
        finally:
            _HELD.pop(key, None)
    finally:
        os.close(fd)


# -- the transaction ----------------------------------------------------------------------------------


def temp_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{TEMP_SUFFIX}")


def _describe_error(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return type(exc).__name__


@dataclass
class Journal:
    root: Path
    paths: Paths
    record: dict = field(default_factory=dict)

    @property
    def ops(self) -> list[dict]:
        return self.record["ops"]

    def backup(self, op: dict) -> Path:
        return self.paths.live / "backups" / op["backup"]


def _plan_record(root: Path, changes: list[Change], command: str) -> tuple[dict, dict[str, bytes]]:
    ops, backups, dirs = [], {}, []
    for i, change in enumerate(changes):
        path = root / change.rel
        exists = path.is_file()
        op = {"rel": change.rel, "action": "delete" if change.text is None else "replace" if exists else "create"}
        if exists:
            op["mode"] = path.stat().st_mode & 0o7777
            op["backup"] = f"{i:04d}"
            backups[op["backup"]] = path.read_bytes()
        if change.text is not None:
            data = change.text.encode("utf-8")
            if os.path.lexists(temp_path(path)):  # ours exist only while a journal does: this one is not ours
                raise ScaffoldError(f"{temp_path(path).relative_to(root)} is in the way of the write; nothing written")
            op["temp"] = temp_path(path).relative_to(root).as_posix()
            op["sha256"] = hashlib.sha256(data).hexdigest()
            if not exists:
                op["mode"] = 0o755 if path.suffix == ".sh" else 0o644
            missing, d = [], path.parent
            while not d.exists():
                missing.append(d)
                d = d.parent
            for m in reversed(missing):
                rel = m.relative_to(root).as_posix()
                if rel not in dirs:
                    dirs.append(rel)  # outermost first
        ops.append(op)
    record = {
        "version": VERSION,
        "command": command,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "pid": os.getpid(),
        "ops": ops,
        "dirs": dirs,
    }
    return record, backups


def _write_journal(root: Path, paths: Paths, record: dict, backups: dict[str, bytes]) -> Journal:
    _mkdir(paths.new)
    _mkdir(paths.new / "backups")
    by_name = {op["backup"]: op for op in record["ops"] if "backup" in op}
    for name, data in backups.items():
        _write(paths.new / "backups" / name, data, by_name[name]["mode"])  # moved back as it is
    _write(paths.new / "journal.json", json.dumps(record, indent=1).encode(), 0o644)
    _fsync_dir(paths.new / "backups")
    _fsync_dir(paths.new)
    _replace(paths.new, paths.live)
    _fsync_dir(paths.home)
    return Journal(root, paths, record)


def _discard(directory: Path) -> None:
    """Delete a journal folder (any state, also a partial one); errors propagate."""
    if not directory.exists():
        return
    backups = directory / "backups"
    if backups.is_dir():
        for p in sorted(backups.iterdir()):
            _unlink(p)
        _rmdir(backups)
    for p in sorted(directory.iterdir()):
        _unlink(p)
    _rmdir(directory)


def apply_changes(root: Path, changes: list[Change], *, command: str = "", fail_after: int | None = None) -> list[Path]:
    """Write every change or none (see the module docstring). `fail_after` injects a failure before change i."""
    root = Path(root)
    paths = Paths.of(root)
    with tree_lock(root):
        if paths.any():
            raise ScaffoldError(
                f"an interrupted omnitts-scaffold transaction is journaled in {paths.home}; run any omnitts-scaffold"
                " command in this tree to settle it first"
            )
        record, backups = _plan_record(root, changes, command)
        try:
            journal = _write_journal(root, paths, record, backups)
        except BaseException as exc:
            problems = _discard_quietly(paths.new)
            raise _failure(exc, "nothing was written", problems, paths) from exc
        try:
            texts = {c.rel: c.text.encode("utf-8") for c in changes if c.text is not None}
            touched = _apply(journal, texts, fail_after)
            for d in touched:
                _fsync_dir(d)
            _replace(paths.live, paths.done)  # the commit point
        except BaseException as exc:
            problems = rollback(journal)
            if not problems:
                problems = _settle(paths)
            if not problems and not isinstance(exc, (OSError, ScaffoldError)):
                raise  # tree restored; an interrupt or a bug keeps its own type
            raise _failure(exc, "tree restored", problems, paths) from exc
        _fsync_dir(paths.home)
        try:
            _discard(paths.done)
        except OSError as exc:
            raise ScaffoldError(
                f"every change was written, but the finished journal {paths.done} could not be removed"
                f" ({_describe_error(exc)}); the next omnitts-scaffold command removes it"
            ) from exc
    return [root / c.rel for c in changes]


def _apply(journal: Journal, texts: dict[str, bytes], fail_after: int | None) -> set[Path]:
    root, touched = journal.root, set()
    for rel in journal.record["dirs"]:
        _mkdir(root / rel)
        touched.add((root / rel).parent)
    for i, op in enumerate(journal.ops):
        if fail_after is not None and i >= fail_after:
            raise OSError(f"injected failure before writing {op['rel']}")
        path = root / op["rel"]
        touched.add(path.parent)
        if op["action"] == "delete":
            _unlink(path)
            continue
        tmp = root / op["temp"]
        _write(tmp, texts[op["rel"]], op["mode"])
        _replace(tmp, path)
    for op in journal.ops:
        if op["action"] == "delete":
            _prune_empty_parents(root, (root / op["rel"]).parent)
    return {d for d in touched if d.exists()}


def _prune_empty_parents(root: Path, directory: Path) -> None:
    """Remove `directory` and its parents below `root` while they are empty (bytecode caches count as empty).

    Rollback recreates them as it moves the deleted files back (bytecode caches are not restored)."""
    d = directory
    while d != root and root in d.parents and d.is_dir():
        cache = d / "__pycache__"
        if cache.is_dir() and all(p.suffix == ".pyc" for p in cache.iterdir()):
            for p in cache.iterdir():
                _unlink(p)
            _rmdir(cache)
        if any(d.iterdir()):
            break
        _rmdir(d)
        d = d.parent


def rollback(journal: Journal) -> list[str]:
    """Undo whatever part of the journal's changes is in the tree; returns 'path (error)' for what failed."""
    root, problems = journal.root, []

    def attempt(what: Path, fn) -> None:
        try:
            fn()
        except Exception as exc:  # carry on: every other file still gets restored
            problems.append(f"{_rel(root, what)} ({_describe_error(exc)})")

    for op in reversed(journal.ops):
        path = root / op["rel"]
        if op.get("temp"):
            attempt(root / op["temp"], lambda t=root / op["temp"]: _unlink(t))
        if op["action"] == "create":
            attempt(path, lambda p=path: _unlink(p))
            continue
        backup = journal.backup(op)
        if backup.exists():
            attempt(path, lambda p=path, b=backup: _restore(root, b, p))
    for rel in reversed(journal.record["dirs"]):
        d = root / rel
        stuck_inside = any(p.startswith(f"{rel}/") for p in problems)  # reported already, not again per parent
        if d.is_dir() and not stuck_inside:
            attempt(d, lambda d=d: _rmdir_ours(d))
    return problems


def _restore(root: Path, backup: Path, path: Path) -> None:
    missing, d = [], path.parent
    while not d.exists():
        missing.append(d)
        d = d.parent
    for m in reversed(missing):
        _mkdir(m)
    _replace(backup, path)


def _rmdir_ours(d: Path) -> None:
    """A folder the transaction created; bytecode caches written into it since are ours to remove too."""
    cache = d / "__pycache__"
    if cache.is_dir() and all(p.suffix == ".pyc" for p in cache.iterdir()):
        for p in cache.iterdir():
            _unlink(p)
        _rmdir(cache)
    _rmdir(d)


def _rel(root: Path, path: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _settle(paths: Paths) -> list[str]:
    """After a complete rollback: mark the journal done (one rename), then delete it."""
    try:
        _replace(paths.live, paths.done)
    except OSError as exc:
        return [f"journal {paths.live} ({_describe_error(exc)})"]
    return _discard_quietly(paths.done)


def _discard_quietly(directory: Path) -> list[str]:
    try:
        _discard(directory)
    except OSError as exc:
        return [f"journal {directory} ({_describe_error(exc)})"]
    return []


def _failure(exc: BaseException, outcome: str, problems: list[str], paths: Paths) -> ScaffoldError:
    cause = (
        str(exc)
        if isinstance(exc, ScaffoldError)
        else f"could not write {exc.filename or ''} ({exc.strerror or exc})"
        if isinstance(exc, OSError)
        else f"interrupted ({type(exc).__name__})"
        if isinstance(exc, KeyboardInterrupt)
        else f"internal error: {type(exc).__name__}: {exc}"
    )
    if not problems:
        return ScaffoldError(f"{cause}; {outcome}")
    return ScaffoldError(
        f"{cause}; rollback could not restore {', '.join(problems)}; the journal in {paths.home} keeps the"
        " original bytes and the next omnitts-scaffold command in this tree finishes the rollback"
    )


# -- recovery -----------------------------------------------------------------------------------------


def recover(root: Path) -> str | None:
    """Settle a journal left by an interrupted run; returns the one line that says what was done, or None.

    Raises ScaffoldError (the journal kept) when the rollback cannot restore everything yet."""
    root = Path(root)
    paths = Paths.of(root)
    if not paths.any():
        return None
    with tree_lock(root):
        try:
            return _settle_found(root, paths)
        except OSError as exc:
            raise ScaffoldError(
                f"settling the journal of an interrupted omnitts-scaffold run in {paths.home}: {exc.filename or ''}"
                f" ({_describe_error(exc)}); fix the cause and run any omnitts-scaffold command again"
            ) from exc


def _settle_found(root: Path, paths: Paths) -> str:
    lines = []
    if paths.new.exists():
        _discard(paths.new)
        lines.append("removed the journal of a transaction interrupted before its first write")
    if paths.live.exists():
        journal = _load(root, paths)
        problems = rollback(journal)
        what = _what(journal.record)
        if problems:
            raise ScaffoldError(
                f"rolling back the interrupted {what}: could not restore {', '.join(problems)}; the journal in"
                f" {paths.home} keeps the original bytes, fix the cause and run any omnitts-scaffold command again"
            )
        _replace(paths.live, paths.done)
        n = len(journal.ops)
        lines.append(f"rolled back the interrupted {what}: {n} file(s) as they were before it")
    if paths.done.exists():
        finished = not any(line.startswith("rolled back") for line in lines)
        _discard(paths.done)
        if finished:
            lines.append("finished an interrupted transaction: every change had been written; its journal removed")
    return "; ".join(lines)


def _what(record: dict) -> str:
    command = record.get("command") or "omnitts-scaffold transaction"
    return f"`{command}` (started {record.get('started', '?')})"


def _load(root: Path, paths: Paths) -> Journal:
    try:
        record = json.loads((paths.live / "journal.json").read_text(encoding="utf-8"))
        if record.get("version") != VERSION:
            raise ValueError(f"version {record.get('version')}")
    except (OSError, ValueError) as exc:
        raise ScaffoldError(
            f"the journal {paths.live} of an interrupted omnitts-scaffold run is unreadable ({exc}); its backups"
            " hold the original files, restore them by hand and delete the folder"
        ) from exc
    return Journal(root, paths, record)
