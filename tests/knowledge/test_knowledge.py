"""The knowledge layer on its own: era objects, the runner contract table, the one literal evaluator, the
one tree_version."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from omnitts.knowledge import layout
from omnitts.knowledge.eras import ERAS, Integration, detect_profile
from omnitts.knowledge.eras.base import read_tree_files
from omnitts.knowledge.errors import TreeError
from omnitts.knowledge.literals import NotLiteral, evaluate, module_constants
from omnitts.knowledge.runner import (
    CONSOLIDATION_ERAS,
    KNOWN_RELEASES,
    consolidation_for,
    contract_for,
    preprocess_id_keys,
)
from omnitts.scaffold.integration import CODEMODS

INTEG = Integration(
    name="my_tts",
    camel="MyTts",
    upper="MY_TTS",
    model_type="my_tts",
    stage_keys=("my_tts",),
    registry=(("MyTtsForConditionalGeneration", "my_tts", "modeling_my_tts", "MyTtsForGeneration"),),
    pipelines=(("my_tts", "vllm_omni.model_executor.models.my_tts.pipeline", "MY_TTS_PIPELINE"),),
    hf_configs=(("my_tts", "vllm_omni.model_executor.models.my_tts.configuration_my_tts", "MyTtsConfig"),),
    adapter_module="my_tts",
)


@pytest.mark.parametrize("era", ERAS, ids=str)
def test_every_patch_names_a_codemod_and_its_inverse(era):
    specs = era.patches(INTEG)
    assert specs, era
    for spec in specs:
        assert spec.codemod in CODEMODS and spec.inverse in CODEMODS, spec
        assert spec.codemod != spec.inverse
    patched = {spec.rel for spec in specs}
    assert layout.SERVING in patched if era.serving_points else layout.SERVING not in patched
    assert (layout.ADAPTERS_INIT in patched) is era.has_adapters
    assert len({p.id for p in era.points}) == len(era.points)


@pytest.mark.parametrize("version", KNOWN_RELEASES)
def test_exactly_the_supported_releases_match_one_era(pristine, version):
    files = read_tree_files(pristine(version))
    matching = [str(era) for era in ERAS if era.matches(files)]
    supported = version >= "0.18.0"
    assert len(matching) == (1 if supported else 0), matching
    if not supported:
        with pytest.raises(TreeError, match="unsupported vLLM-Omni layout"):
            detect_profile(pristine(version))


def test_runner_contract_table():
    assert contract_for("0.18.0").preprocess_id_key is None
    assert contract_for("0.20.0").preprocess_id_key == "request_id"
    assert contract_for("0.30.0", "v2").preprocess_id_key == "req_id"
    assert contract_for("0.23.1") == replace(contract_for("0.22.0"), version="0.23.1")  # row below
    assert contract_for("0.24.0").generation_notifies_finish and not contract_for("0.22.0").generation_notifies_finish
    assert contract_for(None).version == KNOWN_RELEASES[-1]  # the newest supported
    with pytest.raises(ValueError, match="Model Runner V2"):
        contract_for("0.28.0", "v2")
    with pytest.raises(ValueError, match="older than the oldest"):
        contract_for("0.12.0")
    assert {contract_for(v).consolidation_era for v in KNOWN_RELEASES} == set(CONSOLIDATION_ERAS)


@pytest.mark.parametrize("version", KNOWN_RELEASES)
def test_id_keys_read_from_the_tree_agree_with_the_runner_contract(pristine, version):
    """The runner of 0.14-0.18 writes no request_id: a generated model keys on global_request_id there."""
    keys = preprocess_id_keys(pristine(version))
    v1 = contract_for(version).preprocess_id_key or "global_request_id"
    assert keys[-1] == v1
    assert keys[:-1] == (("req_id",) if contract_for(version).consolidation_era == "0.30" else ())
    assert consolidation_for("0.29.0") is consolidation_for("0.26")


def test_contract_of_a_tree_reads_its_version(pristine):
    assert contract_for(Path(pristine("0.24.0"))).version == "0.24.0"


def test_one_literal_evaluator():
    tree = ast.parse('A = "qwen"\nB = f"{A}_tts"\nN = -1\n')
    consts = module_constants(tree)
    assert consts == {"A": "qwen", "B": "qwen_tts", "N": -1}
    expr = ast.parse('[B, StageExecutionType.LLM_AR, (1, 2), {"k": A}, unknown_name]', mode="eval").body
    with pytest.raises(NotLiteral):
        evaluate(expr, consts)
    assert evaluate(expr, consts, unknown=None) == ["qwen_tts", "LLM_AR", (1, 2), {"k": "qwen"}, None]


def test_one_tree_version(tmp_path, pristine):
    assert layout.tree_version(pristine("0.20.0")) == "0.20.0"  # sdist: PKG-INFO
    assert layout.tree_version(pristine("0.22.0")) == "0.22.0"  # wheel: dist-info METADATA
    checkout = tmp_path / "checkout"
    (checkout / "vllm_omni").mkdir(parents=True)
    (checkout / "vllm_omni" / "_version.py").write_text("__version__ = version = '0.31.0.dev4+gabc'\n")
    assert layout.tree_version(checkout) == "0.31.0.dev4+gabc"  # source checkout: setuptools-scm file
    assert layout.tree_version(tmp_path) is None
