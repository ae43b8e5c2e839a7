"""Fetch vLLM-Omni releases from PyPI into a cache, and make fresh working copies of them.

`pypi:vllm-omni==0.20.0` resolves to the sdist where PyPI has one (package, examples, tests, tools,
pyproject with its ruff config), else to the wheel (package only). Downloads and the pristine
extraction are cached under `$OMNITTS_CACHE` (default `~/.cache/omnitts`) and never modified. A scaffold
run works in a git working copy under the work folder (`<cache>/work`, or `--work-dir`): an unchanged
copy of the release (git clean, only the release commit) is reused, so repeated runs do not pile up
~50 MB copies; `clean_work_dir()` removes them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from omnitts.knowledge.errors import TreeError

_SPEC = re.compile(r"^pypi:vllm-omni==(\d+\.\d+\.\d+)$")


def cache_root() -> Path:
    return Path(os.environ.get("OMNITTS_CACHE") or Path.home() / ".cache" / "omnitts")


def parse_spec(spec: str) -> str | None:
    """Return the version of a `pypi:vllm-omni==X.Y.Z` spec, None when the spec is a path."""
    if not spec.startswith("pypi:"):
        return None
    match = _SPEC.match(spec)
    if not match:
        raise TreeError(f"bad release spec {spec!r}; expected pypi:vllm-omni==X.Y.Z")
    return match.group(1)


def _find(dest: Path, version: str, suffix: str) -> Path | None:
    found = sorted(p for p in dest.glob(f"vllm_omni-{version}*") if p.name.endswith(suffix))
    return found[0] if found else None


def _pip_download(version: str, dest: Path, *, sdist: bool) -> Path | None:
    """Download one distribution kind; None when PyPI has none of that kind for this version."""
    suffix = ".tar.gz" if sdist else ".whl"
    cached = _find(dest, version, suffix)
    if cached:
        return cached
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest), f"vllm-omni=={version}"]
    cmd += ["--no-binary", ":all:"] if sdist else ["--only-binary", ":all:"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        if "No matching distribution" in proc.stderr or "Could not find a version" in proc.stderr:
            return None
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise TreeError(f"could not download vllm-omni=={version} from PyPI: {last}")
    return _find(dest, version, suffix)


def download(version: str) -> Path:
    """The cached sdist of `version` if PyPI has one, else its wheel."""
    base = cache_root() / "downloads"
    archive = _pip_download(version, base / "sdist", sdist=True) or _pip_download(version, base / "wheel", sdist=False)
    if archive is None:
        raise TreeError(f"PyPI has neither an sdist nor a wheel of vllm-omni=={version}")
    return archive


class CacheSpaceError(OSError):
    """Too little free disk where a cache entry is about to be built; the message says how much is needed."""


def require_free_space(where: Path, need_gib: float, what: str) -> None:
    """Fail before a multi-GB build starts rather than halfway with pip's ENOSPC (the partial build costs the
    disk the next step needed). ``where`` may not exist yet: its nearest existing parent is measured."""
    existing = Path(where)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free_gib = shutil.disk_usage(existing).free / 2**30
    if free_gib < need_gib:
        raise CacheSpaceError(
            f"{what} needs about {need_gib:g} GiB free under {where}, {free_gib:.1f} GiB is free "
            "(free some space or set OMNITTS_CACHE to a larger disk)"
        )


@contextlib.contextmanager
def cache_lock(name: str):
    """An exclusive lock on one cache entry, so parallel processes (pytest-xdist workers, two scaffold runs)
    download and extract a release once instead of racing on the same paths."""
    locks = cache_root() / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def pristine_tree(version: str) -> Path:
    """Extract the release once into the cache; the result must never be modified."""
    target = cache_root() / "trees" / f"vllm-omni-{version}"
    if (target / "vllm_omni").is_dir():
        return target
    with cache_lock(f"vllm-omni-{version}"):
        if (target / "vllm_omni").is_dir():  # another process finished while this one waited
            return target
        archive = download(version)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".extract-"))
        try:
            if archive.name.endswith(".tar.gz"):
                with tarfile.open(archive) as tar:
                    tar.extractall(tmp, filter="data")
                (inner,) = [p for p in tmp.iterdir() if p.is_dir()]
            else:
                with zipfile.ZipFile(archive) as zf:
                    zf.extractall(tmp / "tree")
                inner = tmp / "tree"
            if target.exists():
                shutil.rmtree(target)  # a partial extraction left by a killed process
            inner.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "omnitts", "GIT_AUTHOR_EMAIL": "omnitts@localhost"}
    env |= {"GIT_COMMITTER_NAME": "omnitts", "GIT_COMMITTER_EMAIL": "omnitts@localhost"}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def work_root(work_dir: Path | None = None) -> Path:
    """Where scaffold runs' working copies live: ``work_dir`` when given, else ``<cache>/work``."""
    return Path(work_dir).expanduser().resolve() if work_dir else cache_root() / "work"


def working_copy(version: str, dest: Path | None = None) -> Path:
    """A fresh git working copy of the release, with the pristine tree as its first commit."""
    src = pristine_tree(version)
    if dest is None:
        dest = cache_root() / "work" / f"vllm-omni-{version}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    if dest.exists() and any(dest.iterdir()):
        raise TreeError(f"working copy destination {dest} already exists and is not empty")
    shutil.copytree(src, dest, dirs_exist_ok=True)
    if shutil.which("git"):
        _git(dest, "init", "-q")
        _git(dest, "add", "-A")
        _git(dest, "commit", "-q", "-m", f"vllm-omni {version} as released on PyPI")
    return dest


_COPY = re.compile(r"^vllm-omni-(\d+\.\d+\.\d+)(-\d+)?$")
_RELEASE_COMMIT = "as released on PyPI"


def _git_out(cwd: Path, *args: str) -> str | None:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def is_unchanged_copy(path: Path) -> bool:
    """A working copy exactly as `working_copy` made it: its own git repository, one commit (the release),
    nothing modified, nothing untracked. Without git nothing can be proved unchanged: False."""
    if not (path / ".git").is_dir() or not shutil.which("git"):
        return False
    log = _git_out(path, "log", "--format=%s", "-n", "2")
    status = _git_out(path, "status", "--porcelain", "--untracked-files=all")
    return log is not None and status == "" and log.strip().endswith(_RELEASE_COMMIT) and len(log.splitlines()) == 1


def copy_for_run(version: str, work_dir: Path | None = None) -> tuple[Path, bool]:
    """(working copy, created): an unchanged copy of ``version`` under the work folder when one exists, else
    a new one (``vllm-omni-X.Y.Z``, then ``-2``, ``-3``, ...)."""
    base = work_root(work_dir)
    base.mkdir(parents=True, exist_ok=True)
    pristine_tree(version)  # download / extract outside the work folder's lock
    with cache_lock(f"work-{hashlib.blake2b(str(base).encode(), digest_size=6).hexdigest()}"):
        for n in range(1, 1000):
            dest = base / (f"vllm-omni-{version}" if n == 1 else f"vllm-omni-{version}-{n}")
            if not dest.exists():
                try:
                    return working_copy(version, dest), True
                except BaseException:
                    shutil.rmtree(dest, ignore_errors=True)  # a half-made copy is never reused
                    raise
            if is_unchanged_copy(dest):
                return dest, False
    raise TreeError(f"{base} holds 999 modified copies of vllm-omni {version}; run omnitts-scaffold clean")


@dataclass(frozen=True)
class CleanResult:
    removed: list[Path]
    kept: list[Path]  # modified copies (a scaffolded model lives there) kept without --all
    freed_bytes: int


def _size(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_symlink() and p.is_file())


def clean_work_dir(work_dir: Path | None = None, *, modified: bool = False, dry_run: bool = False) -> CleanResult:
    """Remove the working copies under the work folder: the unchanged ones, and with ``modified`` also those a
    scaffold run wrote into. Only folders named like a working copy (``vllm-omni-X.Y.Z[-N]``) are touched."""
    base = work_root(work_dir)
    removed, kept, freed = [], [], 0
    for path in sorted(base.iterdir()) if base.is_dir() else []:
        if not (path.is_dir() and not path.is_symlink() and _COPY.match(path.name)):
            continue
        if not modified and not is_unchanged_copy(path):
            kept.append(path)
            continue
        freed += _size(path)
        removed.append(path)
        if not dry_run:
            shutil.rmtree(path)
    return CleanResult(removed, kept, freed)
