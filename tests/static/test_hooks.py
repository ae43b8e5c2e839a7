"""The shipped pre-commit hooks: well-formed, and the integration hook fires on the shared files."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

HOOKS = Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml"


def _hooks():
    return {h["id"]: h for h in yaml.safe_load(HOOKS.read_text())}


def test_two_hooks_with_required_keys():
    hooks = _hooks()
    assert set(hooks) == {"omnitts-lint", "omnitts-integration"}
    for h in hooks.values():
        assert {"id", "name", "entry", "language"} <= set(h)
        assert h["entry"].split()[0] == "omnitts-lint"
    assert hooks["omnitts-lint"].get("pass_filenames", True) is True
    # The integration hook judges the change: it gets the changed files, in one run.
    assert hooks["omnitts-integration"].get("pass_filenames", True) is True
    assert hooks["omnitts-integration"]["require_serial"] is True
    assert "--changed" in hooks["omnitts-integration"]["entry"]


def test_integration_hook_fires_on_shared_files_only():
    pattern = re.compile(_hooks()["omnitts-integration"]["files"])
    shared = [
        "vllm_omni/model_executor/models/registry.py",
        "vllm_omni/config/pipeline_registry.py",
        "vllm_omni/model_executor/models/qwen3_tts/pipeline.py",
        "vllm_omni/deploy/qwen3_tts.yaml",
        "vllm_omni/model_executor/stage_configs/voxcpm.yaml",
        "vllm_omni/model_executor/stage_input_processors/qwen3_tts.py",
        "vllm_omni/entrypoints/openai/tts_adapters/voxcpm2.py",
        "vllm_omni/entrypoints/openai/serving_speech.py",
        "vllm_omni/engine/output_processor.py",
        "examples/offline_inference/text_to_speech/README.md",
    ]
    shared.append("vllm_omni/model_executor/models/qwen3_tts/qwen3_tts_talker.py")  # may enforce max_num_seqs
    private = ["vllm_omni/model_executor/models/qwen3_tts/sub/x.py", "tests/test_x.py", "README.md", "docs/a.md"]
    assert all(pattern.search(p) for p in shared)
    assert not any(pattern.search(p) for p in private)


def test_non_python_files_named_explicitly_are_ignored(tmp_path):
    from omnitts.validators.static.cli import main

    (tmp_path / "notes.md").write_text("# not python\n")
    assert main([str(tmp_path / "notes.md"), "--no-cache"]) == 0
