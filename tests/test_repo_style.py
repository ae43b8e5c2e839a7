"""omnitts's own code passes ruff, with the version its .pre-commit-config.yaml pins (fetched like a target
tree's pinned ruff, so the result does not depend on whichever ruff the environment happens to have)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from omnitts.scaffold.tree_ruff import pinned_ruff_version, ruff_executable

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("command", [["check"], ["format", "--check", "--diff"]], ids=["check", "format"])
def test_repo_passes_its_pinned_ruff(command):
    exe = ruff_executable(pinned_ruff_version(REPO))
    proc = subprocess.run(
        [str(exe), *command, "--no-cache", "--exclude", ".venv*", "."], cwd=REPO, capture_output=True, text=True
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
