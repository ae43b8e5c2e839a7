"""Subjects from the catalog, from a vLLM-Omni tree (needs real vLLM) and from factory specs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from omnitts.validators.runtime import loaders


@pytest.fixture
def sdist(pristine) -> Path:
    """The vLLM-Omni 0.20.0 sdist from PyPI (cached by tests/conftest.py)."""
    return pristine("0.20.0")


def test_read_pipeline_and_registry_of_a_real_tree(sdist):
    SDIST = sdist
    pipe = loaders.read_pipeline(SDIST / "vllm_omni/model_executor/models/qwen3_tts/pipeline.py")
    assert pipe["model_type"] == "qwen3_tts" and len(pipe["stages"]) == 2
    st0, st1 = pipe["stages"]
    assert st0["execution_type"] == "LLM_AR" and st1["execution_type"] == "LLM_GENERATION"
    assert st0["async_chunk_process_next_stage_input_func"].endswith("qwen3_tts.talker2code2wav_async_chunk")
    reg = loaders.read_registry(SDIST / "vllm_omni/model_executor/models/registry.py")
    assert reg["Qwen3TTSCode2Wav"] == ("qwen3_tts", "qwen3_tts_code2wav", "Qwen3TTSCode2Wav")


def test_tree_model_needs_real_vllm_one_line(monkeypatch, sdist):
    SDIST = sdist
    import builtins

    real_import = builtins.__import__

    def no_vllm(name, *a, **k):
        if name == "vllm" or name.startswith("vllm."):
            raise ModuleNotFoundError("No module named 'vllm'")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    with pytest.raises(loaders.LoadError) as err:
        loaders.load_tree_model(SDIST, "qwen3_tts")
    msg = str(err.value)
    assert "real-vLLM tier" in msg and "\n" not in msg


def test_missing_package_in_tree(tmp_path):
    with pytest.raises(loaders.LoadError, match="no model package 'nope'"):
        loaders.load_tree_model(tmp_path, "nope")


def test_template_consumer_handles_every_form():
    fn, origin = loaders.template_consumer()
    if fn is None:
        pytest.skip("scaffold template not present")
    assert "end2end.py" in origin
    want = torch.arange(6.0)
    for form in (
        want,
        want.reshape(1, -1),
        list(want.split(2)),
        [c.reshape(1, -1) for c in want.split(3)],
        want.numpy(),
    ):
        assert torch.equal(torch.as_tensor(np.asarray(fn(form))).reshape(-1).float(), want)
    assert fn(torch.tensor(2.0)).numel() == 1


def test_catalog_adapter():
    if not loaders.list_model_names():
        pytest.skip("no catalog")
    sub = loaders.load_subject("ref_two_stage")
    assert sub.pattern == "two-stage" and sub.two_stage and sub.max_num_seqs[:2] == (4, 1)
    assert sub.connector_extra["codec_chunk_frames"] > 0 and sub.async_chunk_fn is not None
    assert len(sub.prompts) >= 4 and len({len(p.prompt_token_ids) for p in sub.prompts}) >= 4
    assert sub.stages[0].execution == "ar" and sub.stages[1].execution == "generation"
    mut = loaders.load_subject("ref_single_stage@consolidation-skips-audio")
    assert mut.kind == "mutant" and mut.consolidation_era == "0.14" and mut.expected_failure


def test_unknown_model_lists_known():
    if not loaders.list_model_names():
        pytest.skip("no catalog")
    with pytest.raises(loaders.LoadError, match="known: ref_two_stage"):
        loaders.load_subject("nope")


def test_factory_spec():
    sub = loaders.load_subject(str(Path(__file__).with_name("toys.py")) + ":two_stage@leak")
    assert sub.name == "toy_two_stage_leak"
