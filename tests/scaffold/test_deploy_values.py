"""docs/profiles.md's deploy and stage values: generated from the releases' trees by scripts/deploy_values.py, current,
and a scaffold value that matches none of the release's models fails the generator unless a reason is recorded."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("deploy_values", REPO / "scripts" / "deploy_values.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_committed_section_is_generated_from_the_trees(generator):
    section = generator.render()  # raises when a difference has no reason
    doc = (REPO / "docs" / "profiles.md").read_text(encoding="utf-8")
    assert section in doc, "docs/profiles.md is stale: run python scripts/deploy_values.py"
    for release in generator.RELEASES:
        assert f"### vLLM-Omni {release}" in section


def test_a_difference_without_a_reason_fails(generator, monkeypatch):  # INVALID
    reasons = dict(generator.REASONS)
    reasons.pop(("two-stage", "connector.codec_chunk_frames"))
    monkeypatch.setattr(generator, "REASONS", reasons)
    with pytest.raises(SystemExit) as err:
        generator.render(["0.30.0"])
    assert "0.30.0 two-stage connector.codec_chunk_frames" in str(err.value)


def test_legacy_stage_config_is_flattened_like_a_deploy_config(generator):  # VALID
    legacy = {
        "async_chunk": True,
        "stage_args": [
            {
                "stage_id": 0,
                "runtime": {"devices": "0"},
                "engine_args": {"model_stage": "x", "max_num_seqs": 4, "custom_process_next_stage_input_func": "m.f"},
                "default_sampling_params": {"temperature": 0.0, "stop_token_ids": [1]},
            }
        ],
        "runtime": {"connectors": {"c": {"name": "SharedMemoryConnector", "extra": {"codec_chunk_frames": 8}}}},
    }
    deploy = {
        "async_chunk": True,
        "connectors": {"c": {"name": "SharedMemoryConnector", "extra": {"codec_chunk_frames": 8}}},
        "stages": [{"stage_id": 0, "devices": "0", "max_num_seqs": 4, "default_sampling_params": {"temperature": 0.0}}],
    }
    assert (
        generator.deploy_values(legacy)
        == generator.deploy_values(deploy)
        == {
            "async_chunk": True,
            "connector.name": "SharedMemoryConnector",
            "connector.codec_chunk_frames": 8,
            "stage 0.devices": "0",
            "stage 0.max_num_seqs": 4,
            "stage 0.default_sampling_params.temperature": 0.0,
        }
    )


def test_base_config_merges_stages_by_id(generator):  # VALID
    base = {"async_chunk": True, "stages": [{"stage_id": 0, "max_num_seqs": 4}, {"stage_id": 1, "max_num_seqs": 1}]}
    over = {"stages": [{"stage_id": 1, "max_num_seqs": 8}]}
    merged = generator._merge(base, over)
    assert merged == {
        "async_chunk": True,
        "stages": [{"stage_id": 0, "max_num_seqs": 4}, {"stage_id": 1, "max_num_seqs": 8}],
    }
