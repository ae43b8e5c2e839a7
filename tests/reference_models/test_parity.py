"""Parity: the served integration (stepped by the harness, concurrent requests) equals the HF-style
reference: identical greedy codes (two-stage, single-stage) or identical frame count and latents within tolerance
(native-ar), and waveforms within ``atol`` (1e-5 on CPU, 1e-4 on CUDA)."""

from __future__ import annotations

import pytest
import torch
from served_outputs import final_value, upstream_codes

from omnitts.reference_models.catalog import get_subject

MODELS = ["ref_two_stage", "ref_single_stage", "ref_native_ar"]


def _codes(record, pattern: str) -> torch.Tensor:
    if pattern == "two-stage":
        return upstream_codes(record)
    return final_value(record, "codes.audio")


def _check(texts, records, references, pattern: str, atol: float) -> None:
    for text, record, ref in zip(texts, records, references, strict=True):
        assert record.finished and not record.aborted
        if pattern == "native-ar":
            latents = final_value(record, "latent")
            assert latents.shape == ref.latents.shape, f"{text!r}: frame count differs"
            torch.testing.assert_close(latents, ref.latents, atol=atol, rtol=0)
        else:
            assert torch.equal(_codes(record, pattern), ref.codes), f"{text!r}: greedy codes differ"
        stream = record.stream_audio
        assert stream.shape == ref.waveform.shape, f"{text!r}: {stream.shape} vs {ref.waveform.shape}"
        torch.testing.assert_close(stream, ref.waveform, atol=atol, rtol=0)
        offline = final_value(record, "audio")
        assert isinstance(offline, torch.Tensor)
        torch.testing.assert_close(offline.reshape(-1), stream, atol=0, rtol=0)
        assert record.steps_without_model_outputs == 0
        assert record.sample_rate == ref.sample_rate


@pytest.mark.parametrize("model", MODELS)
def test_served_equals_reference(model, texts, served, references, atol):
    _check(texts, served(model), references(model), get_subject(model).pattern, atol)


def test_two_stage_without_async_chunk_equals_reference(texts, served, references, atol):
    """Non-async path: talker2code2wav decodes each request's consolidated codes at once."""
    _check(texts, served("ref_two_stage", async_chunk=False), references("ref_two_stage"), "two-stage", atol)


def test_two_stage_chunked_decoding_matches_full_decoding(device, atol):
    """Async-chunk windows (chunk frames + left context, trimmed) concatenate to the full decode."""
    subject = get_subject("ref_two_stage")
    talker, code2wav = subject.build(device)
    config = talker.config
    codes = torch.randint(
        0, config.codebook_size, (config.num_code_groups, 29), generator=torch.Generator().manual_seed(3)
    )
    codes = codes.to(device)
    full = code2wav.decoder(codes[None])[0]
    extra = subject.runtime(device).connector_extra
    chunk, left = int(extra["codec_chunk_frames"]), int(extra["codec_left_context_frames"])
    pieces = []
    for start in range(0, codes.shape[1], chunk):
        context = min(left, start)
        window = codes[:, start - context : start + chunk]
        out = code2wav(
            input_ids=window.reshape(-1),
            positions=None,
            runtime_additional_information=[{"meta": {"left_context_size": context}}],
        )
        pieces.append(out.multimodal_outputs["model_outputs"][0])
    torch.testing.assert_close(torch.cat(pieces).cpu(), full.cpu(), atol=atol, rtol=0)
