"""The parity verdicts (``validators/verdicts/parity.py``) over typed observations: each passes the correct port
and fails the bug it must catch, naming where it diverges; a release's by-design difference is named, not tolerated;
a run that cannot be judged fails closed."""

from __future__ import annotations

import numpy as np
import pytest

from omnitts.validators import checkids
from omnitts.validators.observations.audio import Source
from omnitts.validators.observations.parity import ParityObservation, ParityRequest
from omnitts.validators.observations.schema import dump, load
from omnitts.validators.verdicts import VERDICTS
from omnitts.validators.verdicts.base import FAILED, PASSED
from omnitts.validators.verdicts.tolerances import PARITY, parity_tolerance

RNG = np.random.default_rng(0)
CODES = RNG.integers(1, 2048, size=(23, 4))
WAVE = RNG.standard_normal(2000).astype(np.float32)
OTHER = RNG.standard_normal(2000).astype(np.float32)


def _request(rid="r0", **over) -> ParityRequest:
    fields = dict(
        ref_waveform=WAVE,
        ref_codes=CODES,
        ref_decoded=WAVE,
        codes=CODES.copy(),
        waveform=WAVE.copy(),
        batched=WAVE + 1e-7,
        decoded=WAVE.copy(),
    )
    return ParityRequest(rid, "Hello.", **{**fields, **over})


def _obs(*requests: ParityRequest, **over) -> ParityObservation:
    fields = dict(
        source=Source("offline", "cpu"),
        capture="cap",
        reference="qwen-tts 0.1.1",
        model="qwen3_tts",
        release="0.30.0",
        dtype="float32",
        requests=requests or (_request(),),
        sample_rate=24000,
        followed=("Talker._embedding_dtype: torch.bfloat16 -> torch.float32",),
    )
    return ParityObservation(**{**fields, **over})


def _judge(check: str, obs: ParityObservation):
    judge = VERDICTS[check]
    assert judge.needs == (ParityObservation,)
    return judge({ParityObservation: obs})


@pytest.mark.parametrize("check", checkids.PARITY)
def test_correct_port_passes_every_parity_check(check):
    found = _judge(check, _obs(_request("r0"), _request("r1")))
    assert found.outcome == PASSED, found.message()
    assert "qwen-tts 0.1.1, float32" in found.headline and "followed the dtype" in found.headline
    # the release's by-design differences are named beside the verdict
    assert "qwen3_tts.codebook0_code0" in found.headline


def test_codes_name_the_first_divergent_frame_and_codebook():
    swapped = CODES.copy()
    swapped[5:, [1, 2]] = swapped[5:, [2, 1]]
    found = _judge(checkids.PARITY_CODES, _obs(_request("ok"), _request("bad", codes=swapped)))
    assert found.outcome == FAILED
    assert "1 of 2 requests diverge" in found.headline
    assert "bad: 5/23 frames agree; first divergence at frame 5, codebook 1" in found.message()
    assert found.metrics["bad"]["first_divergence"] == [5, 1] and found.metrics["ok"]["agreeing_frames"] == 23


def test_a_known_difference_is_named_and_still_fails():
    ref = CODES.copy()
    ref[3, 0] = 0  # the reference emits first-codebook code 0, which 0.30.0's talker never does
    got = ref.copy()
    got[3, 0] = 17
    found = _judge(checkids.PARITY_CODES, _obs(_request(ref_codes=ref, codes=got)))
    assert found.outcome == FAILED
    assert "explained by the known difference qwen3_tts.codebook0_code0" in found.message()
    assert found.metrics["r0"]["known_difference"] == "qwen3_tts.codebook0_code0"


def test_codes_not_observed_fail_closed():
    found = _judge(checkids.PARITY_CODES, _obs(_request(codes=None)))
    assert found.outcome == FAILED and "were not observed" in found.message()


def test_bfloat16_codes_use_the_topk_criterion():
    got = CODES.copy()
    got[7, 2] = 5
    topk = np.repeat(CODES[:, :, None], 5, axis=2)
    topk[7, 2, 3] = 5  # the integration's choice is among the reference's five best
    bf16 = dict(dtype="bfloat16")
    within = _judge(checkids.PARITY_CODES, _obs(_request(codes=got, ref_topk=topk), **bf16))
    assert within.outcome == PASSED, within.message()
    own = np.repeat(CODES[:, :, None], 5, 2)  # the reference's five best are all its own choice
    outside = _judge(checkids.PARITY_CODES, _obs(_request(codes=got, ref_topk=own), **bf16))
    assert outside.outcome == FAILED and "frame 7, codebook 2: code outside the other side's top-5" in outside.message()
    no_topk = _judge(checkids.PARITY_CODES, _obs(_request(codes=got), **bf16))
    assert no_topk.outcome == FAILED and "the capture lacks" in no_topk.message()
    # bf16 waveforms are judged by their length only
    assert _judge(checkids.PARITY_END_TO_END, _obs(_request(waveform=OTHER), **bf16)).outcome == PASSED
    assert _judge(checkids.PARITY_END_TO_END, _obs(_request(waveform=OTHER[:-10]), **bf16)).outcome == FAILED


def test_end_to_end_places_the_divergence():
    swapped = CODES[:, [0, 2, 1, 3]]
    generator = _judge(checkids.PARITY_END_TO_END, _obs(_request(codes=swapped, waveform=OTHER)))
    assert generator.outcome == FAILED and generator.metrics["r0"]["where"] == "generator"
    says = "diverges in the generator (0/23 frames agree; first divergence at frame 0, codebook 1"
    assert says in generator.message()
    decoder = _judge(checkids.PARITY_END_TO_END, _obs(_request(waveform=WAVE * 0.5, decoded=WAVE * 0.5)))
    assert decoder.metrics["r0"]["where"] == "decoder"
    hand_over = _judge(checkids.PARITY_END_TO_END, _obs(_request(waveform=WAVE[:-480])))
    assert hand_over.metrics["r0"]["where"] == "hand-over" and "length 1520 vs reference 2000" in hand_over.message()
    # the audio to listen to: the reference beside what the integration said
    assert [w.name for w in hand_over.wavs()] == ["r0_reference", "r0_waveform"]


def test_decoder_alone_and_batched_catch_their_own_bugs():
    codec = _judge(checkids.PARITY_DECODER_ALONE, _obs(_request(decoded=WAVE.astype(np.float16).astype(np.float32))))
    assert codec.outcome == FAILED and "decoder alone" in codec.message() and "SNR" in codec.message()
    assert _judge(checkids.PARITY_END_TO_END, _obs(_request(batched=OTHER))).outcome == PASSED
    batch = _judge(checkids.PARITY_BATCHED, _obs(_request(batched=OTHER)))
    assert batch.outcome == FAILED and "r0: batched waveform" in batch.message()
    missing = _judge(checkids.PARITY_DECODER_ALONE, _obs(_request(decoded=None)))
    assert missing.outcome == FAILED and "decoder alone was not observed" in missing.message()


def test_latent_models_compare_latents():
    lat = RNG.standard_normal((12, 8)).astype(np.float32)
    req = dict(ref_codes=None, codes=None, ref_latents=lat)
    assert _judge(checkids.PARITY_CODES, _obs(_request(latents=lat.copy(), **req))).outcome == PASSED
    moved = lat.copy()
    moved[4:] += 0.01
    found = _judge(checkids.PARITY_CODES, _obs(_request(latents=moved, **req)))
    assert found.outcome == FAILED and "latents differ from frame 4 on" in found.message()


@pytest.mark.parametrize(
    ("over", "says"),
    [
        (dict(error="RuntimeError: engine died (engine log: x)"), "the parity run against cap failed"),
        (dict(checkpoint_differs=("model.safetensors",)), "made on another checkpoint (model.safetensors differ)"),
        (dict(dtype="int8"), "no parity tolerance for dtype 'int8'"),
        (dict(requests=()), "has no requests"),
    ],
)
def test_unjudgeable_runs_fail_closed(over, says):
    for check in checkids.PARITY:
        found = _judge(check, _obs(**over))
        assert found.outcome == FAILED and says in found.headline, found.headline


def test_the_tolerance_table_holds_the_parity_rows():
    assert parity_tolerance("float32").exact_codes and parity_tolerance("float32").wave_atol == 1e-5
    assert not parity_tolerance("bfloat16").exact_codes and parity_tolerance("bfloat16").topk == 5
    assert set(PARITY) == {"float32", "bfloat16"}
    with pytest.raises(KeyError, match="no parity tolerance"):
        parity_tolerance("int8")


def test_the_observation_crosses_the_schema():
    obs = _obs(_request(), _request("r1", codes=None))
    back = load(dump(obs))
    assert back.requests[1].codes is None and np.array_equal(back.requests[0].codes, CODES)
    assert _judge(checkids.PARITY_END_TO_END, back).outcome == PASSED
