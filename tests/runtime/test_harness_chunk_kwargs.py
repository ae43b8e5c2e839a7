"""The harness calls the async-chunk stage input processor the way the release's chunk transfer adapter does:
keyword arguments only, the step's payload under ``pooling_output`` (to 0.22) or ``multimodal_output`` (0.24+).
A processor whose payload parameter has the other release's name fails the fast tier, as it fails the engine
(``Failed to use custom_process_input_func ... unexpected keyword argument 'multimodal_output'``).
And it takes back what the adapter takes: a dict (to 0.20) or an ``OmniPayloadStruct`` (0.22+, whose ``.meta`` the
adapter sets: a dict there gave no audio through the 0.30 engine)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import toys

from omnitts.knowledge.runner import contract_for
from omnitts.validators.runtime.harness import ContractError, Harness, ModelError

_mm_processor = toys.talker2code2wav_async_chunk_struct  # the 0.24+ parameter name, an OmniPayloadStruct back


def _mm_dict_processor(transfer_manager, multimodal_output, request, is_finished=False):
    """The 0.24+ parameter name, but a dict back (what the scaffold generated for 0.30 before)."""
    return toys.talker2code2wav_async_chunk(transfer_manager, multimodal_output, request, is_finished)


def _pooling_struct_processor(transfer_manager, pooling_output, request, is_finished=False):
    """0.22's parameter name and return type."""
    return toys.talker2code2wav_async_chunk_struct(transfer_manager, pooling_output, request, is_finished)


def _run(release: str, processor):
    sub = replace(toys.two_stage(release=release), async_chunk_fn=processor)
    return Harness(sub).run(sub.prompts[:1], "t")


def test_the_contract_names_the_payload_keyword():
    assert contract_for("0.20.0").chunk_payload_kwarg == "pooling_output"
    assert contract_for("0.22.0").chunk_payload_kwarg == "pooling_output"
    assert contract_for("0.24.0").chunk_payload_kwarg == "multimodal_output"
    assert contract_for("0.30.0").chunk_payload_kwarg == "multimodal_output"


def test_pooling_output_processor_fails_under_a_030_contract():
    with pytest.raises(ModelError, match="stage input processor") as caught:
        _run("0.30.0", toys.talker2code2wav_async_chunk)
    assert isinstance(caught.value.original, TypeError)
    assert "multimodal_output" in str(caught.value.original)


def test_multimodal_output_processor_passes_under_a_030_contract():
    run = _run("0.30.0", _mm_processor)
    assert all(r.stream_audio.numel() for r in run.requests.values())


def test_multimodal_output_processor_fails_under_a_020_contract():
    with pytest.raises(ModelError, match="stage input processor"):
        _run("0.20.0", _mm_processor)
    run = _run("0.20.0", toys.talker2code2wav_async_chunk)
    assert all(r.stream_audio.numel() for r in run.requests.values())


def test_the_contract_names_the_return_type():
    assert not contract_for("0.20.0").chunk_payload_struct
    assert all(contract_for(v).chunk_payload_struct for v in ("0.22.0", "0.24.0", "0.28.0", "0.30.0"))


@pytest.mark.parametrize(
    "release,processor", [("0.22.0", toys.talker2code2wav_async_chunk), ("0.30.0", _mm_dict_processor)]
)
def test_a_dict_window_fails_under_a_struct_contract(release, processor):
    with pytest.raises(ContractError, match="needs an OmniPayloadStruct"):
        _run(release, processor)


def test_a_struct_window_fails_under_a_020_contract():
    def struct_020(transfer_manager, pooling_output, request, is_finished=False):
        return toys.talker2code2wav_async_chunk_struct(transfer_manager, pooling_output, request, is_finished)

    with pytest.raises(ContractError, match="reads a dict"):
        _run("0.20.0", struct_020)


@pytest.mark.parametrize("release,processor", [("0.22.0", _pooling_struct_processor), ("0.30.0", _mm_processor)])
def test_a_struct_window_carries_the_same_audio_as_a_020_dict(release, processor):
    """The struct crosses to the decoder as the dict it stands for (its set fields; codes as a tensor)."""
    got = _run(release, processor)
    want = _run("0.20.0", toys.talker2code2wav_async_chunk)
    for ext, res in want.requests.items():
        assert res.stream_audio.numel() and torch.equal(got.requests[ext].stream_audio, res.stream_audio)
