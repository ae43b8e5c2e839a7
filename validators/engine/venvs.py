"""Virtual environments omnitts builds in its cache (the CPU engine's, each reference's): made once under a lock,
marked ready with the fingerprint of the recipe that built them, rebuilt when the recipe changes.

What goes into one is its recipe's business (``install`` for the engine, ``parity.refenv`` for a reference); how
it is created, stepped, marked and shared between parallel processes is the same for all, so it lives here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omnitts.knowledge.releases import CacheSpaceError, cache_lock, require_free_space

PIP_INSTALL = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check")


@dataclass(frozen=True)
class CachedVenv:
    """One cached environment: where it is, the marker that says it is ready, and how its errors read."""

    path: Path
    marker: str  # file name, inside ``path``, of the JSON written when a build finished
    fingerprint: str  # the recipe's; a marker with another one is a stale build
    tag: str  # log prefix, e.g. "[omnitts-engine-env]"
    what: str  # error prefix, e.g. "engine env"
    error: type[Exception]

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def lock(self) -> str:  # the cache lock's name: the folder's, one lock per environment
        return self.path.name

    @property
    def pip(self) -> list[str]:
        return [str(self.python), *PIP_INSTALL]

    def run(self, step: str, cmd: list[str], log: Callable[[str], None]) -> None:
        log(f"{self.tag} {step}: {' '.join(cmd)}")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
            raise self.error(f"{self.what}: {step} failed (exit {proc.returncode}):\n{tail}")

    def ready(self) -> dict | None:
        """The marker's record when the environment was built by this recipe and is still there, else None."""
        try:
            info = json.loads((self.path / self.marker).read_text())
        except (OSError, ValueError):
            return None
        return info if info.get("fingerprint") == self.fingerprint and self.python.exists() else None

    def create(self, disk_gib: float, purpose: str, log: Callable[[str], None]) -> None:
        """An empty venv at ``path``, or the unfinished one already there (every build step is idempotent)."""
        if self.path.exists() and not self.python.exists():
            shutil.rmtree(self.path)
        if not self.path.exists():
            try:
                require_free_space(self.path, disk_gib, purpose)
            except CacheSpaceError as exc:
                raise self.error(f"{self.what}: {exc}") from None
            self.run("venv", [sys.executable, "-m", "venv", str(self.path)], log)

    def freeze(self) -> list[str]:
        return subprocess.run([str(self.python), "-m", "pip", "freeze"], capture_output=True, text=True).stdout.split()

    def ensure(
        self,
        build: Callable[[], dict],
        log: Callable[[str], None],
        ready_msg: str,
        then: Callable[[dict], None] | None = None,
    ) -> dict:
        """Build once: parallel callers wait on the lock, a build from an older recipe is removed first; ``then``
        runs on the marker's record under the same lock. Returns the record."""
        with cache_lock(self.lock):
            info = self.ready()
            if info is None:
                if (self.path / self.marker).exists():
                    shutil.rmtree(self.path)
                info = build()
                (self.path / self.marker).write_text(json.dumps(info, indent=1))
                log(f"{self.tag} {ready_msg} in {info['seconds']} s: {self.path}")
            if then is not None:
                then(info)
            return info


def site_packages(py: Path) -> Path:
    out = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def hide_c_extensions(site: Path, package: str) -> list[str]:
    """torchaudio's CUDA wheel ships C extensions linked against libc10_cuda; without them it runs as pure
    Python (what vLLM-Omni uses of it). Rename them out of the import system's reach."""
    hidden = []
    for so in (site / package).rglob("*.so"):
        target = so.with_name(so.name + ".omnitts-hidden")
        so.rename(target)
        hidden.append(str(target))
    hidden += [str(p) for p in (site / package).rglob("*.so.omnitts-hidden")]
    return sorted(set(hidden))
