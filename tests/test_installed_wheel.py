"""The built wheel works on its own, from any directory: the scaffold finds its templates (folders named like
``{{cookiecutter.name}}`` are data no package finder picks up) and ``omnitts-validate`` runs the checks.

The wheel is installed with ``--target`` into a scratch folder that is put first on ``PYTHONPATH``, so the
subprocesses import it, not this checkout (asserted)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    # build from a clean copy: a build/ folder (or egg-info) left in the checkout would leak into the wheel
    src = tmp / "src"
    junk = shutil.ignore_patterns(
        ".git", ".venv*", ".cache", "build", "dist", "*.egg-info", "__pycache__", "omnitts-out"
    )
    shutil.copytree(REPO, src, ignore=junk)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--quiet", "-w", str(tmp / "dist")],
        capture_output=True,
        text=True,
        cwd=tmp,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("omnitts-*.whl")
    target = tmp / "site"
    inst = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert inst.returncode == 0, inst.stderr[-2000:]
    return target


def _run(target: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(target)}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_wheel_is_what_runs(installed, tmp_path):
    proc = _run(installed, tmp_path, "-c", "import omnitts.templates as t; print(next(iter(t.__path__)))")
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).is_relative_to(installed)


def test_installed_scaffold_renders_every_pattern(installed, tmp_path, work_tree):
    tree = work_tree("0.20.0")
    for pattern in ("two-stage", "single-stage", "native-ar"):
        name = f"w_{pattern.replace('-', '_')}"
        proc = _run(installed, tmp_path, "-m", "omnitts.scaffold.cli", "new", name, "--pattern", pattern,
                    "--target", str(tree), "--dry-run")  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"vllm_omni/model_executor/models/{name}/" in proc.stdout


def test_installed_validators_run_from_anywhere(installed, tmp_path):
    code = "import sys; from omnitts.validators.plugin import run_from_anywhere; sys.exit(run_from_anywhere())"
    proc = _run(installed, tmp_path, "-c", code, "--model", "ref_single_stage", "-q", "-p", "no:xdist")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout
