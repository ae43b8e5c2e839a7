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
    from omnitts.validators.engine import install

    return install.engine_python(RELEASE)  # the tests' engine runs where the validators' does (install.engine_python)


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


@pytest.hookimpl(trylast=True)  # after -m / -k deselected what does not run
def pytest_collection_modifyitems(config, items):
    """The Gradio demo's browser tests need Chromium, chromedriver and ffmpeg from the system (apt): when they are
    selected and one is missing, the session stops before any test with one line (not one error per test)."""
    if not any(Path(str(item.fspath)).name == "test_gradio_demo.py" for item in items):
        return
    from .demo_env import DemoEnvError, browser

    try:
        browser()
    except DemoEnvError as exc:
        raise pytest.UsageError(
            f"tests/engine/test_gradio_demo.py: {exc}, or deselect it with -k 'not gradio_demo'"
        ) from None
