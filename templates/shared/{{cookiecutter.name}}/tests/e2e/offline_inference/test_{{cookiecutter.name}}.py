{{cookiecutter.license_header}}
"""E2E offline test for {{cookiecutter.camel}}: one utterance, checked for audio, sample rate and duration."""

import pytest
import torch

from tests.helpers.mark import hardware_test
from tests.helpers.stage_config import get_deploy_config_path

MODEL = "{{cookiecutter.hf_repo}}"
DEPLOY = get_deploy_config_path("{{cookiecutter.model_type}}.yaml")


def _waveform(audio) -> torch.Tensor:
    # multimodal_output["audio"] is a Tensor or a list of chunks (invariant I2): never test truthiness.
    if isinstance(audio, list):
        return torch.cat([torch.as_tensor(a).reshape(-1) for a in audio], dim=0)
    return torch.as_tensor(audio).reshape(-1)


@pytest.mark.{% if cookiecutter.priority == "high" %}core_model{% elif cookiecutter.priority == "medium" %}advanced_model{% else %}full_model{% endif %}
@pytest.mark.omni
@hardware_test(res={"cuda": "H100"}, num_cards=1)
def test_text_to_audio() -> None:
    from vllm import SamplingParams

    from vllm_omni import Omni

    omni = Omni(model=MODEL, deploy_config=DEPLOY)
    text = "Hello from vLLM-Omni."
    request = {"prompt": text, "additional_information": {"text": [text]}}
    params = SamplingParams(temperature=0.0, max_tokens=2048, detokenize=False)
{%- if cookiecutter.flat_request_output %}
    # Omni.generate() yields OmniRequestOutput, a vLLM RequestOutput: its completions are `.outputs`.
    outputs = [out for req in omni.generate(request, params) for out in req.outputs]
{%- else %}
    # Omni.generate() yields OmniRequestOutput; the stage's RequestOutput is `.request_output`.
    stages = omni.generate(request, params)
    outputs = [out for stage in stages if stage.request_output is not None for out in stage.request_output.outputs]
{%- endif %}
    audio_outputs = [out.multimodal_output for out in outputs if out.multimodal_output is not None]
    assert len(audio_outputs) == 1
    mm = audio_outputs[0]
    assert mm.get("audio") is not None, "no audio key in multimodal_output"
    waveform = _waveform(mm["audio"])
    assert waveform.dtype == torch.float32
    assert waveform.numel() > 0
    sr = mm.get("sr")
    sr = int(sr[-1] if isinstance(sr, list) else sr)
    assert sr == {{cookiecutter.sample_rate}}
    assert 0.0 < waveform.numel() / sr < 60.0
