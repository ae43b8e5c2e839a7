"""The static rules key on what values are, not on the names the mined corpus happened to use: the two
cases a new user hit (the guide's own I2 example inside a test helper; a per-request value kept in a plain
attribute inside a batched hook), and the same bugs written other ways."""

from __future__ import annotations

import textwrap

import pytest

from omnitts.validators.static import api

TEST_PATH = "tests/e2e/offline_inference/test_demo_tts.py"
MODEL_PATH = "vllm_omni/model_executor/models/demo_tts/modeling_demo_tts.py"


def _lint(tmp_path, rel: str, code: str, select: str):
    p = tmp_path / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(code))
    res = api.run([p], root=tmp_path, select=[select])
    assert not res.errors
    return [f for f in res.findings if f.invariant == select]


# --- (a) the guide's I2 example inside a test helper that receives the output dict --------------------
HELPER_WITH_CALLER = """
    def _extract_audio(output):
        audio = output.get("audio") or output.get("model_outputs")
        return audio


    def test_generates(omni, prompts):
        for req in omni.generate(prompts):
            wav = _extract_audio(req.outputs[0].multimodal_output)
            assert wav is not None
"""

HELPER_ALONE = """
    def extract_audio(mm):
        audio = mm.get("audio") or mm.get("model_outputs")
        if isinstance(audio, list):
            audio = audio[-1]
        return audio
"""

HELPER_METHOD = """
    class AudioChecks:
        def check(self, out):
            self._check_dict(out.outputs[0].multimodal_output)

        def _check_dict(self, d):
            assert d["audio"], "no audio"
"""

HELPER_CLEAN = """
    def _extract_audio(output):
        audio = output.get("audio")
        if audio is None:
            audio = output.get("model_outputs")
        return audio


    def test_generates(omni, prompts):
        for req in omni.generate(prompts):
            wav = _extract_audio(req.outputs[0].multimodal_output)
            assert wav is not None
"""


@pytest.mark.parametrize(
    "code,line",
    [(HELPER_WITH_CALLER, 2), (HELPER_ALONE, 2), (HELPER_METHOD, 6)],
    ids=["helper-called-with-the-dict", "helper-reading-the-engine-key", "method-receiving-the-dict"],
)
def test_i2_truthiness_in_a_helper_receiving_the_output_dict(tmp_path, code, line):
    found = _lint(tmp_path, TEST_PATH, code, "I2")
    assert [f.rule for f in found] == ["OMNI-I2-001"], found
    assert found[0].line == line + 1  # textwrap keeps the leading newline


def test_i2_is_none_chain_in_a_helper_is_quiet(tmp_path):
    assert _lint(tmp_path, TEST_PATH, HELPER_CLEAN, "I2") == []


def test_i2_helper_in_an_example_benchmark_or_server_too(tmp_path):
    for rel in (
        "examples/offline_inference/text_to_speech/demo_tts/end2end.py",
        "benchmarks/bench_demo_tts.py",
        "vllm_omni/entrypoints/openai/serving_demo.py",
    ):
        found = _lint(tmp_path, rel, HELPER_WITH_CALLER, "I2")
        assert [f.rule for f in found] == ["OMNI-I2-001"], (rel, found)


# --- (b) a per-request value kept in a plain attribute inside a batched hook ------------------------
PLAIN_ATTR = '''
    import torch
    from vllm_omni.model_executor.models.output_templates import OmniOutput


    class DemoCode2Wav(torch.nn.Module):
        def forward(self, input_ids, runtime_additional_information=None, **kwargs):
            """Delta audio."""
            outs = []
            for req in runtime_additional_information or []:
                self.ref_codes = req.get("ref_codes")
                outs.append(self.codec(req["codes"]))
            return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})

        def compute_logits(self, hidden_states, sampling_metadata=None):
            return self.head(hidden_states, self.ref_codes)
'''

PLAIN_ATTR_VIA_HELPER = '''
    import torch
    from vllm_omni.model_executor.models.output_templates import OmniOutput


    class DemoCode2Wav(torch.nn.Module):
        def forward(self, input_ids, **kwargs):
            """Delta audio."""
            batch = list(kwargs.get("runtime_additional_information") or [])
            outs = []
            i = 0
            while i < len(batch):
                item = batch[i]
                i += 1
                self._remember(item)
                outs.append(self.codec(item["codes"]))
            return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})

        def _remember(self, item):
            speaker = item.get("speaker")
            self.last_speaker = speaker

        def compute_logits(self, hidden_states, sampling_metadata=None):
            return self.head(hidden_states) + self.last_speaker
'''

KEYED = '''
    import torch
    from vllm_omni.model_executor.models.output_templates import OmniOutput


    class DemoCode2Wav(torch.nn.Module):
        def forward(self, input_ids, runtime_additional_information=None, **kwargs):
            """Delta audio."""
            outs = []
            for req in runtime_additional_information or []:
                self.ref_codes[req["request_id"]] = req.get("ref_codes")
                outs.append(self.codec(req["codes"]))
            return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})

        def on_requests_finished(self, finished_req_ids):
            for rid in finished_req_ids:
                self.ref_codes.pop(rid, None)
'''


@pytest.mark.parametrize(
    "code,line",
    [(PLAIN_ATTR, 11), (PLAIN_ATTR_VIA_HELPER, 21)],
    ids=["in-the-hook-loop", "through-a-helper-and-a-while-loop"],
)
def test_i5_per_request_value_in_a_plain_attribute(tmp_path, code, line):
    found = _lint(tmp_path, MODEL_PATH, code, "I5")
    assert [(f.rule, f.line) for f in found] == [("OMNI-I5-006", line)], found


def test_i5_per_request_value_keyed_by_request_is_quiet(tmp_path):
    assert [f for f in _lint(tmp_path, MODEL_PATH, KEYED, "I5") if f.rule == "OMNI-I5-006"] == []
