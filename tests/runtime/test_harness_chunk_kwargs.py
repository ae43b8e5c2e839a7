"""The harness calls the async-chunk stage input processor the way the release's chunk transfer adapter does:
keyword arguments only, the step's payload under ``pooling_output`` (to 0.22) or ``multimodal_output`` (0.24+).
A processor whose payload parameter has the other release's name fails the fast tier, as it fails the engine
(``Failed to use custom_process_input_func ... unexpected keyword argument 'multimodal_output'``)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import toys

from omnitts.knowledge.runner import contract_for
from omnitts.validators.runtime.harness import Engine, ModelError


def _mm_processor(transfer_manager, multimodal_output, request, is_finished=False):
    """The toy processor with the 0.24+ parameter name."""
    return toys.talker2code2wav_async_chunk(transfer_manager, multimodal_output, request, is_finished)


def _run(release: str, processor):
    sub = replace(toys.two_stage(release=release), async_chunk_fn=processor)
    return Engine(sub).run(sub.prompts[:1], "t")


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
