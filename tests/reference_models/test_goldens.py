"""Golden regression: reference and served outputs against reference_models/goldens/*.json (written on CPU)."""

from __future__ import annotations

import pytest
import torch
from served_outputs import final_value, upstream_codes

from omnitts.reference_models import goldens
from omnitts.reference_models.catalog import get_subject

MODELS = list(goldens.MODELS)


def _compare(model: str, outputs: list[dict]) -> list[str]:
    problems = []
    for got, want in zip(outputs, goldens.load_golden(model)["utterances"], strict=True):
        where = f"{model} {want['text']!r}"
        if got["num_frames"] != want["num_frames"]:
            problems.append(f"{where}: {got['num_frames']} frames, golden {want['num_frames']}")
            continue
        if "codes" in want and got["codes"] != want["codes"]:
            problems.append(f"{where}: codes differ from the golden codes")
        if "latents" in want:
            problems += [
                f"{where}: latents {p}"
                for p in goldens.compare_fingerprint(got["latents"], want["latents"], goldens.LATENT_ATOL)
            ]
        problems += [
            f"{where}: waveform {p}"
            for p in goldens.compare_fingerprint(got["waveform"], want["waveform"], goldens.WAVEFORM_ATOL)
        ]
    return problems


def test_golden_texts_are_the_test_texts(texts):
    assert list(goldens.GOLDEN_TEXTS) == texts


@pytest.mark.parametrize("model", MODELS)
def test_reference_matches_golden(model, references):
    outputs = [goldens.utterance_golden(ref) for ref in references(model)]
    assert not _compare(model, outputs)


@pytest.mark.parametrize("model", MODELS)
def test_served_matches_golden(model, served):
    pattern = get_subject(model).pattern
    outputs = []
    for record in served(model):
        entry = {"num_frames": 0, "waveform": goldens.waveform_fingerprint(record.stream_audio)}
        if pattern == "two-stage":
            codes = upstream_codes(record)
            entry.update(num_frames=codes.shape[0], codes=codes.tolist())
        elif pattern == "single-stage":
            codes = final_value(record, "codes.audio")
            entry.update(num_frames=codes.shape[0], codes=codes.tolist())
        else:
            latents = final_value(record, "latent")
            entry.update(
                num_frames=latents.shape[0] // get_subject(model).make_config().patch_size,
                latents=goldens.waveform_fingerprint(latents),
            )
        outputs.append(entry)
    assert not _compare(model, outputs)


def test_goldens_are_small():
    total = sum(p.stat().st_size for p in goldens.GOLDEN_DIR.glob("*"))
    assert total < 100_000


def test_golden_codes_digest_is_consistent():
    for model in MODELS:
        for entry in goldens.load_golden(model)["utterances"]:
            if "codes" in entry:
                assert goldens.codes_digest(torch.tensor(entry["codes"])) == entry["codes_sha256"]
