"""Codemods on small sources (exact before/after) and on the real shared files of 0.20.0 and 0.22.0."""

import ast
import difflib
import textwrap

import pytest

from omnitts.knowledge.detection import compile_detector, known_detections, stage_keys
from omnitts.scaffold.codemods.base import run_codemod
from omnitts.scaffold.codemods.hf_config import RegisterHfConfig
from omnitts.scaffold.codemods.registry import AddDictTupleEntry
from omnitts.scaffold.codemods.serving_five_point import FivePointServing
from omnitts.scaffold.errors import ScaffoldError

REGISTRY_BEFORE = textwrap.dedent(
    """\
    _OMNI_MODELS = {
        "A": (
            "a",
            "modeling_a",
            "A",
        ),
        # comment about B
        "B": (
            "b",
            "modeling_b",
            "B",
        ),
    }
    """
)


def add_entry(source, key="New", values=("new", "modeling_new", "NewCls")):
    kwargs = dict(dict_name="_OMNI_MODELS", key=key, values=values, what="architecture")
    return run_codemod(AddDictTupleEntry, source, "registry.py", **kwargs)


def test_registry_entry_appended_in_ruff_format():
    assert add_entry(REGISTRY_BEFORE) == REGISTRY_BEFORE.replace(
        "    ),\n}\n", '    ),\n    "New": (\n        "new",\n        "modeling_new",\n        "NewCls",\n    ),\n}\n'
    )


def test_registry_entry_idempotent_and_conflict_refused():
    once = add_entry(REGISTRY_BEFORE)
    assert add_entry(once) == once
    with pytest.raises(ScaffoldError, match="architecture 'A' already exists"):
        add_entry(REGISTRY_BEFORE, key="A")


def test_missing_anchor_is_a_clear_error():
    with pytest.raises(ScaffoldError, match="anchor `_OMNI_MODELS = {...}` not found"):
        add_entry("OTHER = {}\n")


def test_unparsable_file_is_a_clear_error():
    with pytest.raises(ScaffoldError, match="does not parse"):
        add_entry("_OMNI_MODELS = {\n")


HF_BEFORE = textwrap.dedent(
    """\
    def _register_omni_hf_configs() -> None:
        try:
            from transformers import AutoConfig

            from vllm_omni.model_executor.models.aaa.config import AConfig
            from vllm_omni.model_executor.models.zzz.config import ZConfig
        except Exception:
            return
        for model_type, config_cls in [
            ("aaa", AConfig),
            ("zzz", ZConfig),
        ]:
            AutoConfig.register(model_type, config_cls)
    """
)


def test_hf_config_import_sorted_and_pair_appended():
    out = run_codemod(
        RegisterHfConfig,
        HF_BEFORE,
        "arg_utils.py",
        model_type="mmm",
        module="vllm_omni.model_executor.models.mmm.configuration_mmm",
        class_name="MmmConfig",
    )
    lines = out.splitlines()
    imports = [line.strip() for line in lines if "import" in line and "vllm_omni" in line]
    assert imports == sorted(imports) and len(imports) == 3
    assert '        ("mmm", MmmConfig),' in lines
    assert (
        run_codemod(
            RegisterHfConfig,
            out,
            "arg_utils.py",
            model_type="mmm",
            module="vllm_omni.model_executor.models.mmm.configuration_mmm",
            class_name="MmmConfig",
        )
        == out
    )


def _serving(version, pristine):
    return (pristine(version) / "vllm_omni/entrypoints/openai/serving_speech.py").read_text()


def _five_point(source, name="my_tts", stage="my_tts"):
    return run_codemod(
        FivePointServing,
        source,
        "serving_speech.py",
        name=name,
        camel="MyTts",
        upper=name.upper(),
        model_type=name,
        stage_keys=(stage,),
    )


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0"])
def test_five_points_on_real_serving_speech(pristine, version):
    before = _serving(version, pristine)
    after = _five_point(before)
    ast.parse(after)
    diff = [
        d
        for d in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if d[:1] in "+-" and d[:3] not in ("+++", "---")
    ]
    assert all(d.startswith("+") for d in diff), "the patch must only add lines"
    added = "\n".join(diff)
    for expected in (
        '_MY_TTS_TTS_MODEL_STAGES = {"my_tts"}',
        "| _MY_TTS_TTS_MODEL_STAGES",
        "if model_stage in _MY_TTS_TTS_MODEL_STAGES:",
        "return self._validate_my_tts_request(request)",
        "def _validate_my_tts_request(self, request: OpenAICreateSpeechRequest) -> str | None:",
        "async def _build_my_tts_params(self, request: OpenAICreateSpeechRequest) -> dict[str, Any]:",
        'elif self._tts_model_type == "my_tts":',
        "tts_params = await self._build_my_tts_params(request)",
        'model_type = "my_tts"',
    ):
        assert expected in added, expected
    assert "_create_tts_request" not in after  # the guide's name; no release has it
    assert _five_point(after) == after  # idempotent


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0"])
def test_patched_detection_executes(pristine, version):
    before = _serving(version, pristine)
    after = _five_point(before)
    new = compile_detector(after)
    assert new("my_tts") == "my_tts"
    old_types = known_detections(before)
    assert set(old_types.values()) >= {"qwen3_tts", "fish_tts", "moss_tts_nano", "cosyvoice3"}
    assert {k for k, _ in old_types} == stage_keys(before)  # every old key resolves to some type
    for (key, arch), model_type in old_types.items():
        assert new(key, arch) == model_type, (key, arch)
    assert new("no_such_stage") is None


def test_stage_key_owned_by_another_model_refused(pristine):
    with pytest.raises(ScaffoldError, match="stage key 'moss_tts_nano' is already served by _MOSS_TTS_MODEL_STAGES"):
        _five_point(_serving("0.20.0", pristine), stage="moss_tts_nano")
