"""Subjects from the catalog, from a vLLM-Omni tree (needs real vLLM) and from factory specs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from omnitts.validators.runtime import loaders
from omnitts.validators.runtime.catalogs import installed


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


CATALOGS = installed()


def test_the_reference_catalog_is_handed_in_not_imported():
    """The reference models' catalog registers itself (entry points); the loader names no catalog module."""
    assert [c.__name__ for c in CATALOGS] == ["omnitts.reference_models.names"]
    assert "reference_models" not in Path(loaders.__file__).read_text()
    with pytest.raises(loaders.LoadError, match="no model catalog is installed"):
        loaders.load_subject("ref_two_stage")


def test_catalog_adapter():
    sub = loaders.load_subject("ref_two_stage", CATALOGS)
    assert sub.pattern == "two-stage" and sub.two_stage and sub.max_num_seqs[:2] == (4, 1)
    assert sub.connector_extra["codec_chunk_frames"] > 0 and sub.async_chunk_fn is not None
    assert len(sub.prompts) >= 4 and len({len(p.prompt_token_ids) for p in sub.prompts}) >= 4
    assert sub.stages[0].execution == "ar" and sub.stages[1].execution == "generation"
    mut = loaders.load_subject("ref_single_stage@consolidation-skips-audio", CATALOGS)
    assert mut.kind == "mutant" and mut.consolidation_era == "0.14" and mut.expected_failure


def test_unknown_model_lists_known():
    with pytest.raises(loaders.LoadError, match="known: ref_two_stage"):
        loaders.load_subject("nope", CATALOGS)


def test_factory_spec():
    sub = loaders.load_subject(str(Path(__file__).with_name("toys.py")) + ":two_stage@leak")
    assert sub.name == "toy_two_stage_leak"


def test_the_registered_names_are_the_catalogs_own():
    """The names the command line is checked against (no torch import: reference_models/names.py) are the catalog's
    own, in its order."""
    from omnitts.reference_models import catalog

    assert loaders.list_model_names(CATALOGS) == catalog.list_models()


@pytest.mark.parametrize(
    "name, root, expected",
    [
        ("ref_two_stage", None, None),
        ("ref_two_stage@replay", None, None),
        ("ref_two_stag", None, "did you mean ref_two_stage?"),
        ("ref_two_stage@replai", None, "did you mean ref_two_stage@replay?"),
        ("qwen_tts", None, "a model in a vLLM-Omni tree needs --omni-root DIR"),
        ("missing.py:factory", None, "no such file missing.py"),
        ("no_such_pkg.mod:factory", None, "no module no_such_pkg.mod"),
        ("my_tts", "TREE", None),
        ("my_ttz", "TREE", "did you mean my_tts? the tree's models: my_tts, qwen3_tts"),
        ("zzz", "TREE", "; the tree's models: my_tts, qwen3_tts"),
        ("my_tts", "NOT_A_TREE", "not a vLLM-Omni tree (no vllm_omni/ folder in it)"),
    ],
)
def test_a_model_name_is_checked_before_anything_runs(tmp_path, name, root, expected):
    models = tmp_path / "tree" / "vllm_omni" / "model_executor" / "models"
    for model in ("my_tts", "qwen3_tts", "__pycache__"):
        (models / model).mkdir(parents=True)
    root = {"TREE": tmp_path / "tree", "NOT_A_TREE": tmp_path, None: None}[root]
    problem = loaders.model_problem(name, root, CATALOGS)
    if expected is None:
        assert problem is None
    else:
        assert expected in problem and "\n" not in problem and problem.startswith(("--model", "--omni-root"))
