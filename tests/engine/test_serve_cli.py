"""``omnitts-serve``'s refusals: one line and exit 1 before anything starts (its serving itself is exercised by
tests/engine/test_tutorial_route.py, with the probe)."""

from __future__ import annotations

import subprocess
import sys

MODELS = "vllm_omni/model_executor/models"


def _serve(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "omnitts.validators.engine.serve_cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_not_a_tree(tmp_path):  # INVALID
    proc = _serve("--omni-root", str(tmp_path), "--model", "my_tts")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"omnitts-serve: --omni-root {tmp_path}: not a vLLM-Omni tree (no vllm_omni/)"


def test_unknown_model_names_the_nearest(tmp_path):  # INVALID
    for name in ("my_tts", "qwen3_tts", "__pycache__"):
        (tmp_path / MODELS / name).mkdir(parents=True)
    proc = _serve("--model", "my_ttss", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("omnitts-serve: --model my_ttss: no such model in ")
    assert lines[0].endswith("holds 2); did you mean my_tts?")


def test_the_servers_own_startup_bounds_follow_the_wait(tmp_path):  # VALID / INVALID
    """The server gives up at its own start-up timeouts (0.30.0: 600 s for all stages) however long omnitts-serve waits:
    both are raised to the wait where the tree's CLI declares them."""
    from omnitts.knowledge.engine import serve_timeout_args
    from omnitts.knowledge.releases import pristine_tree

    assert serve_timeout_args(pristine_tree("0.30.0"), 1800.0) == [
        "--init-timeout",
        "1800",
        "--stage-init-timeout",
        "1800",
    ]
    assert serve_timeout_args(tmp_path, 1800.0) == []  # a tree whose CLI has no such flag: nothing is passed


def test_the_engines_own_startup_bounds_follow_the_engine_timeout(tmp_path):  # VALID / INVALID
    """Under contention the 0.30.0 offline Omni gave up with "Orchestrator did not become ready within 600s" although
    the engine tier was given 1800 s (measured in the tutorial route test): the offline plan and the server tier's
    command carry the tree's own bounds, raised to the engine timeout, where the tree reads them."""
    from pathlib import Path

    from omnitts.knowledge.engine import omni_timeout_kwargs
    from omnitts.knowledge.releases import pristine_tree
    from omnitts.validators.engine.offline import omni_kwargs
    from omnitts.validators.engine.runtime import EngineEnv, Server, StagePlacement

    tree = pristine_tree("0.30.0")
    assert omni_timeout_kwargs(tree, 1800.0) == {"init_timeout": 1800, "stage_init_timeout": 1800}
    assert omni_timeout_kwargs(tmp_path, 1800.0) == {}  # a tree whose Omni reads no such keyword: nothing is passed
    assert omni_kwargs({"init_timeout": 1800})["init_timeout"] == 1800  # reaches Omni(...) in the engine's process

    env = EngineEnv("0.30.0", Path(sys.executable), tree, tmp_path, StagePlacement())
    waited = Server(env, tmp_path / "model", tmp_path / "server.log", port=1, startup_timeout=1800.0).command()
    assert waited[waited.index("--init-timeout") + 1] == "1800"
    assert waited[waited.index("--stage-init-timeout") + 1] == "1800"
    assert "--init-timeout" not in Server(env, tmp_path / "model", tmp_path / "server.log", port=1).command()
