"""A cached virtual environment with the real `vllm==0.20.0` (8.8 GiB, 2-3 minutes to build)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from omnitts.knowledge import releases

VLLM_VERSION = "0.20.0"
REPO = Path(__file__).resolve().parents[2]


def cache_dir() -> Path:
    return releases.cache_root()  # tests/conftest.py points OMNITTS_CACHE at .cache/ unless it is set


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
    with releases.cache_lock(f"venv-vllm-{VLLM_VERSION}"):  # pytest-xdist workers share it
        if not ready.exists():
            # measured: 8.8 GiB once built (CUDA torch and its nvidia libraries, flashinfer's cubins)
            releases.require_free_space(venv.parent, 9.0, f"the real vllm=={VLLM_VERSION} test environment")
            log = venv.parent / f"vllm-{VLLM_VERSION}.log"
            _run([sys.executable, "-m", "venv", "--clear", str(venv)], log)
            _run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], log)
            _run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    f"vllm=={VLLM_VERSION}",
                    "soundfile",
                    "pytest",
                    "pytest-timeout",
                ],
                log,
            )
            # omnitts itself, without re-resolving torch & co. (vllm pinned its own torch)
            _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(REPO)], log)
            _run(
                [str(python), "-m", "pip", "install", "--quiet", "jinja2", "cookiecutter", "libcst", "pyyaml", "ruff"],
                log,
            )
            ready.write_text("ok\n")
    return python


def scaffolded_tree(python: Path, patterns: dict[str, str]) -> Path:
    """A 0.20.0 working copy with one model per pattern scaffolded, installed editable into the venv.

    Built once per cache (file-locked for pytest-xdist workers); a digest of the scaffold's sources and
    templates invalidates it when they change.
    """
    import hashlib

    from omnitts.knowledge.releases import working_copy
    from omnitts.scaffold import cli

    digest = hashlib.sha256()
    for folder in ("scaffold", "templates"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.read_bytes())
    base = cache_dir() / "real_vllm"
    base.mkdir(parents=True, exist_ok=True)
    tree = base / f"tree-{digest.hexdigest()[:12]}"
    with releases.cache_lock("real-vllm-tree"):
        if not (tree / ".omnitts-installed").exists():
            import shutil

            shutil.rmtree(tree, ignore_errors=True)
            working_copy(VLLM_VERSION, tree)
            for name, pattern in patterns.items():
                if cli.main(["new", name, "--pattern", pattern, "--target", str(tree)]) != 0:
                    raise RuntimeError(f"scaffold of {name} ({pattern}) failed")
            env_version = {"SETUPTOOLS_SCM_PRETEND_VERSION": VLLM_VERSION}
            log = base / "install-tree.log"
            with log.open("a") as fh:
                proc = subprocess.run(
                    [str(python), "-m", "pip", "install", "--quiet", "-e", str(tree)],
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **env_version},
                )
            if proc.returncode != 0:
                raise RuntimeError(f"pip install -e {tree} failed; see {log}")
            (tree / ".omnitts-installed").write_text("ok\n")
    return tree


import pytest  # noqa: E402

MODELS = {"gen_two_stage": "two-stage", "gen_single_stage": "single-stage", "gen_native_ar": "native-ar"}


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    return vllm_venv()


@pytest.fixture(scope="session")
def real_tree(vllm_python) -> Path:
    return scaffolded_tree(vllm_python, MODELS)
