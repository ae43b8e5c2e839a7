"""A cached virtual environment with the real `vllm==0.20.0` (about 8 GB, 2-3 minutes to build)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

VLLM_VERSION = "0.20.0"
REPO = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    return Path(os.environ.get("OMNITTS_CACHE") or REPO / ".cache")


def _run(cmd: list[str], log: Path) -> None:
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log.read_text().splitlines()[-15:]
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(cmd)}\n" + "\n".join(tail))


def vllm_venv() -> Path:
    """Build once (file-locked: pytest-xdist workers share it) and return the venv's python."""
    venv = cache_dir() / "venvs" / f"vllm-{VLLM_VERSION}"
    python = venv / "bin" / "python"
    ready = venv / ".omnitts-ready"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f".vllm-{VLLM_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            log = venv.parent / f"vllm-{VLLM_VERSION}.log"
            _run([sys.executable, "-m", "venv", "--clear", str(venv)], log)
            _run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], log)
            _run([str(python), "-m", "pip", "install", "--quiet", f"vllm=={VLLM_VERSION}", "soundfile", "pytest", "pytest-timeout"], log)
            # omnitts itself, without re-resolving torch & co. (vllm pinned its own torch)
            _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(REPO)], log)
            _run([str(python), "-m", "pip", "install", "--quiet", "jinja2", "cookiecutter", "libcst", "pyyaml"], log)
            ready.write_text("ok\n")
    return python


def install_tree(python: Path, tree: Path) -> None:
    """pip install -e the scaffolded vLLM-Omni tree into the venv (one tree at a time)."""
    log = python.parent.parent.parent / "install-tree.log"
    with open(python.parent.parent / ".tree.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _run([str(python), "-m", "pip", "install", "--quiet", "-e", str(tree)], log)


if __name__ == "__main__":
    print(vllm_venv())
