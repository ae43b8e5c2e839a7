"""Deterministic fault injection for the scaffold's file operations (tests prove the transaction with it).

`OMNITTS_FAULT=KIND:N` makes the Nth file operation of the process fail; every mutating call of the
journal and of the apply goes through `point()`, so N names one exact step:

- `kill:N`   the process sends itself SIGKILL (no handler, no cleanup runs: a power cut for the tree);
- `erofs:N`  operation N and every later one in the same folder raise EROFS (that folder went read-only);
- `enospc:N` operation N and every later one that writes data raise ENOSPC (the disk stays full;
             renames, unlinks and rmdirs still go through, as on a real full disk).

Unset, `point()` costs one counter increment. The counter is per process; `reset()` re-reads the variable.
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

from omnitts.scaffold.errors import ScaffoldError

ENV = "OMNITTS_FAULT"
KINDS = ("kill", "erofs", "enospc")
WRITES = ("mkdir", "write")  # operations that need free blocks

_state: dict = {}


def reset() -> None:
    """Forget the count and the spec; the next `point()` reads `OMNITTS_FAULT` again."""
    _state.clear()


def _spec() -> tuple[str, int] | None:
    if "spec" not in _state:
        raw = os.environ.get(ENV, "").strip()
        spec = None
        if raw:
            kind, _, n = raw.partition(":")
            if kind not in KINDS or not n.isdigit() or int(n) < 1:
                raise ScaffoldError(f"{ENV}={raw!r}: expected one of {', '.join(KINDS)} and ':N' (N >= 1)")
            spec = (kind, int(n))
        _state.update(spec=spec, count=0, fired=None)
    return _state["spec"]


def count() -> int:
    """File operations performed so far in this process (since the last `reset()`)."""
    _spec()
    return _state["count"]


def point(op: str, path: Path) -> None:
    """Called before every mutating file operation `op` (mkdir, write, replace, unlink, rmdir) on `path`."""
    spec = _spec()
    _state["count"] += 1
    if spec is None:
        return
    kind, n = spec
    fired = _state["fired"]
    if fired is None and _state["count"] == n:
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        _state["fired"] = fired = Path(path).parent
        code = errno.EROFS if kind == "erofs" else errno.ENOSPC
        raise OSError(code, os.strerror(code), str(path))
    if fired is None:
        return
    if kind == "erofs" and Path(path).parent == fired:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
    if kind == "enospc" and op in WRITES:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
