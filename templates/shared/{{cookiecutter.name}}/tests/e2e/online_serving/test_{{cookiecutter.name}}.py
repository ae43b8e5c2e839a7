{{cookiecutter.license_header}}
"""E2E online test for {{cookiecutter.camel}} over /v1/audio/speech (one OmniServerParams set per file)."""

import io
import wave

import pytest

from tests.helpers.mark import hardware_test
from tests.helpers.runtime import OmniServerParams
from tests.helpers.stage_config import get_deploy_config_path

MODEL = "{{cookiecutter.hf_repo}}"


@pytest.mark.{% if cookiecutter.priority == "high" %}core_model{% elif cookiecutter.priority == "medium" %}advanced_model{% else %}full_model{% endif %}
@pytest.mark.omni
@hardware_test(res={"cuda": "H100"}, num_cards=1)
@pytest.mark.parametrize(
    "omni_server",
    [
        pytest.param(
            OmniServerParams(model=MODEL, stage_config_path=get_deploy_config_path("{{cookiecutter.model_type}}.yaml")),
            id="{{cookiecutter.name}}",
        )
    ],
    indirect=True,
)
def test_speech_wav(omni_server, openai_client) -> None:
    response = openai_client.audio.speech.create(model=MODEL, input="Hello from vLLM-Omni.", voice="default")
    with wave.open(io.BytesIO(response.content)) as wav:
        assert wav.getframerate() == {{cookiecutter.sample_rate}}
        assert wav.getnframes() > 0
