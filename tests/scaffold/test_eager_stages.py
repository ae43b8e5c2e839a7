"""Scaffold bug (issue 10, found on an H200 with vLLM 0.30.0): the generated two-stage talker ran under vLLM's CUDA
graphs. Its per-request state lives in Python between ``preprocess()`` and ``forward()``; a captured graph replays
``forward()``'s kernels without that Python, so the next eager ``forward()`` met a finished request's key
(``KeyError`` in ``forward``, the engine core died). On CPU no graph is captured, so only a GPU run showed it.
Every stage the scaffold generates keeps such state, so every generated stage must run eager
(``enforce_eager: true``) until the contributor makes ``forward()`` graph-safe (guide Phase 5).
"""

from __future__ import annotations

import pytest
import yaml

from omnitts.scaffold.cli import main
from omnitts.scaffold.naming import PATTERNS


def _stage_settings(root, name: str) -> list[dict]:
    """Each stage's engine settings as the release reads them: 0.20+ deploy YAML, 0.18 stage_configs YAML."""
    deploy = root / "vllm_omni" / "deploy" / f"{name}.yaml"
    if deploy.is_file():
        return yaml.safe_load(deploy.read_text())["stages"]
    [legacy] = (root / "vllm_omni" / "model_executor" / "stage_configs").glob(f"{name}*.yaml")
    return [stage["engine_args"] for stage in yaml.safe_load(legacy.read_text())["stage_args"]]


@pytest.mark.parametrize("version", ["0.18.0", "0.20.0", "0.30.0"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_generated_stage_runs_eager(work_tree, version, pattern):
    root = work_tree(version)
    name = f"eager_{pattern.replace('-', '_')}"
    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    stages = _stage_settings(root, name)
    assert stages
    assert [stage.get("enforce_eager") for stage in stages] == [True] * len(stages), stages
