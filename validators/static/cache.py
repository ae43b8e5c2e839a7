"""Content-hash cache for warm re-runs: one pickle per configuration (validator sources, selected
rules, target-tree facts), mapping each file to (content digest, findings). Lives under
``$OMNITTS_CACHE/lint`` (default ``~/.cache/omnitts/lint``), outside any tree that gets linted."""

from __future__ import annotations

import os
import pickle
import tempfile
from dataclasses import replace
from pathlib import Path

from omnitts.validators.static.finding import Finding

FORMAT = 1


def cache_dir() -> Path:
    base = os.environ.get("OMNITTS_CACHE")
    return (Path(base) if base else Path.home() / ".cache" / "omnitts") / "lint"


class Cache:
    def __init__(self, key: str, directory: Path | None = None) -> None:
        self.dir = directory or cache_dir()
        self.file = self.dir / f"v{FORMAT}-{key}.pickle"
        self.entries: dict[str, tuple] = {}  # path -> (digest, findings, outgoing calls)
        self.dirty = False
        try:
            with open(self.file, "rb") as fh:
                self.entries = pickle.load(fh)
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError):
            self.entries = {}  # a missing or unreadable cache only costs a cold run

    def get(self, path: str, digest: str, display: str) -> tuple[list[Finding], list] | None:
        hit = self.entries.get(path)
        if hit is None or hit[0] != digest or len(hit) != 3:
            return None
        return [f if f.path == display else replace(f, path=display) for f in hit[1]], hit[2]

    def put(self, path: str, digest: str, findings: list[Finding], outgoing: list | None = None) -> None:
        self.entries[path] = (digest, findings, outgoing or [])
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(self.entries, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.file)
        except OSError:
            pass  # read-only home: linting still works, only slower next time
