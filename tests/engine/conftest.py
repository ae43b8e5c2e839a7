"""Engine-tier tests: the real vLLM-Omni engine on CPU, in the cached engine environment (built on first use)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from omnitts.knowledge.engine import cpu_engine_releases

RELEASE = cpu_engine_releases()[-1]  # the newest release with a CPU engine recipe (0.30.0)


@pytest.fixture(scope="session")
def engine_python() -> Path:
    from omnitts.validators.engine.install import ensure_engine_env

    return ensure_engine_env(RELEASE)


@pytest.fixture(scope="session")
def engine_overlay(tmp_path_factory, engine_python) -> Path:
    from omnitts.validators.engine.install import overlay

    return overlay(tmp_path_factory.mktemp("overlay"))


def scaffold(tmp: Path, pattern: str, name: str) -> Path:
    """A fresh copy of the release's pristine tree with one model scaffolded into it."""
    from omnitts.knowledge.releases import pristine_tree

    tree = tmp / f"tree-{name}"
    shutil.copytree(pristine_tree(RELEASE), tree)
    proc = subprocess.run(
        [sys.executable, "-m", "omnitts.scaffold.cli", "new", name, "--pattern", pattern, "--target", str(tree)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tree
