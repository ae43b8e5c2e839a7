"""The shipped hooks through pre-commit itself (`pre-commit try-repo`), on a stock vLLM-Omni 0.30.0 checkout
with one scaffolded model staged: the integration hook judges the change, not the tree.

try-repo installs omnitts from a git repo into pre-commit's own environment (pip, from PyPI or its cache):
minutes on a cold cache, hence `slow`. The omnitts repo is a temporary commit of this checkout's files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GIT = ["git", "-c", "user.name=omnitts-test", "-c", "user.email=test@omnitts.invalid", "-c", "commit.gpgsign=false"]

pytestmark = pytest.mark.slow


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _omnitts_repo(dest: Path) -> Path:
    """This checkout's tracked and untracked-but-not-ignored files, committed in a fresh repo."""
    files = _git(REPO, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "omnitts under test")
    return dest


@pytest.fixture(scope="module")
def omnitts_repo(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.fail("git is needed to run the hooks through pre-commit")
    return _omnitts_repo(tmp_path_factory.mktemp("omnitts-repo"))


def _try_repo(tree: Path, repo: Path, hook: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(repo), hook, "--verbose"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_integration_hook_judges_the_staged_model_only(work_tree, omnitts_repo, tmp_path):
    from omnitts.scaffold.cli import main as scaffold

    tree = work_tree("0.30.0")
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "stock vllm-omni 0.30.0")
    # The stock tree has findings of its own (other models' deploy files): the hook must not see them.
    stock = subprocess.run(
        [sys.executable, "-m", "omnitts.validators.static.cli", "--integration", "--full-scan", "--no-cache"],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    assert stock.returncode == 1 and "OMNI-INT-001" in stock.stdout, stock.stderr

    assert scaffold(["new", "my_tts", "--pattern", "two-stage", "--target", str(tree)]) == 0
    _git(tree, "add", "-A")
    home = tmp_path / "pre-commit-home"
    ok = _try_repo(tree, omnitts_repo, "omnitts-integration", home)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Passed" in ok.stdout and "model(s) my_tts" in ok.stdout, ok.stdout
    # The per-file hook on the same staged change (patched shared files included) passes too.
    per_file = _try_repo(tree, omnitts_repo, "omnitts-lint", home)
    assert per_file.returncode == 0, per_file.stdout + per_file.stderr

    # A real violation in the model's own deploy file: its AR (talker) stage serialized.
    deploy = tree / "vllm_omni/deploy/my_tts.yaml"
    text = deploy.read_text()
    assert "    max_num_seqs: 4\n" in text
    deploy.write_text(text.replace("    max_num_seqs: 4\n", "    max_num_seqs: 1\n", 1))
    _git(tree, "add", "vllm_omni/deploy/my_tts.yaml")
    bad = _try_repo(tree, omnitts_repo, "omnitts-integration", home)
    assert bad.returncode != 0, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout and "vllm_omni/deploy/my_tts.yaml" in bad.stdout and "OMNI-INT-001" in bad.stdout
    assert "glm_tts" not in bad.stdout  # still only the staged model's findings
