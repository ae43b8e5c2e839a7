"""The diagnostics verdicts on typed observations, VALID and INVALID: NaN/Inf said once (every comparing check says
"not judged"), the audio gates, replays, seams, whose audio a request received, fixed seeds, and aborts."""

from __future__ import annotations

import numpy as np
import pytest

from omnitts.validators import checkids
from omnitts.validators.observations.audio import (
    ConcurrencyObservation,
    ConcurrentRound,
    OutputsObservation,
    ReferenceObservation,
    ReferencePair,
    RequestAudio,
    SeedObservation,
    Source,
    StreamObservation,
    StreamPair,
)
from omnitts.validators.observations.state import (
    AbortAttempt,
    AbortObservation,
    Container,
    Memory,
    StateSnapshot,
    WorkerState,
)
from omnitts.validators.verdicts import VERDICTS
from omnitts.validators.verdicts.base import FAILED, NOT_APPLICABLE

from .test_signal import CHUNK, SR, fade, pcm16, sizes, voice

SERVER = Source("server")
HARNESS = Source("harness")
TEXTS = ("Hello there.", "A second, longer sentence for the engine tier.", "Third one!", "Four: the last text.")
# about 0.05 s per character, in whole pieces of 80 ms
AUDIO = {t: pcm16(voice(CHUNK * max(4, round(len(t) * 0.05 * SR / CHUNK)), seed=i)) for i, t in enumerate(TEXTS)}


def judge(check, obs):
    return VERDICTS[check].fn(obs)


def req(text: str, samples=None, pieces=True, label=None) -> RequestAudio:
    x = AUDIO[text] if samples is None else samples
    return RequestAudio(label or repr(text), x, SR, tuple(sizes(x.size)) if pieces else (), text)


def nan(text: str) -> RequestAudio:
    x = AUDIO[text].copy()
    x[100:] = np.nan
    return req(text, x)


# ------------------------------------------------------------------------------------------ NaN/Inf, said once


def test_finite_audio_passes_and_nan_is_named_with_where_it_starts():
    assert judge(checkids.AUDIO_FINITE, OutputsObservation(SERVER, tuple(req(t) for t in TEXTS))).passed
    v = judge(checkids.AUDIO_FINITE, OutputsObservation(HARNESS, (req(TEXTS[0]), nan(TEXTS[2]))))
    assert v.outcome == FAILED and len(v.findings) == 1
    text = v.findings[0].text
    assert text.startswith("'Third one!':") and "NaN/Inf, the first at sample 100 (0.006 s)" in text


def test_every_check_that_compares_audio_defers_nan_to_audio_finite():
    bad = nan(TEXTS[0])
    observations = {
        checkids.I1_STREAM_EQUALS_OFFLINE: StreamObservation(HARNESS, (StreamPair("s", bad, req(TEXTS[0])),)),
        checkids.I1_NO_REPLAY: StreamObservation(HARNESS, (StreamPair("s", bad, req(TEXTS[0])),)),
        checkids.I1_SEAMS: StreamObservation(HARNESS, (StreamPair("s", bad, req(TEXTS[0])),)),
        checkids.I1_MATCHES_REFERENCE: ReferenceObservation(HARNESS, (ReferencePair(bad, req(TEXTS[0])),)),
        checkids.I4_CONCURRENCY: ConcurrencyObservation(
            HARNESS, tuple(req(t) for t in TEXTS), (ConcurrentRound("r", (bad, *(req(t) for t in TEXTS[1:]))),)
        ),
        checkids.I4_SEED_DETERMINISM: SeedObservation(HARNESS, (bad,), {bad.request: 1}, ()),
        checkids.AUDIO_GATES: OutputsObservation(HARNESS, (bad,)),
    }
    for check, obs in observations.items():
        v = judge(check, obs)
        assert v.outcome == NOT_APPLICABLE, check
        assert v.headline == f"not judged: 'Hello there.' ({bad.size - 100} NaN/Inf samples) - see audio.finite"


# ------------------------------------------------------------------------------------------ gates


def test_speech_like_audio_passes_the_gates_with_its_numbers():
    v = judge(checkids.AUDIO_GATES, OutputsObservation(SERVER, tuple(req(t) for t in TEXTS), pcm=True))
    assert v.passed and not v.warnings
    row = v.metrics["requests"][0]
    assert row["text"] == TEXTS[0] and row["silence_ratio"] == 0 and row["seconds_per_char"] > 0


@pytest.mark.parametrize(
    "samples, needle",
    [
        (np.zeros(8000, dtype=np.float32), "SILENCE: 100% of its 20 ms frames"),
        (np.full(8000, -1.0, dtype=np.float32), "CONSTANT: every sample is -1.0000"),
        (np.sign(voice(8000)).astype(np.float32), "SATURATED: 100% of the samples at full scale"),
        (voice(400 * SR), "DURATION: 33.333 s per character"),
        (np.zeros(0, dtype=np.float32), "no audio at all"),
    ],
    ids=["silent", "constant", "saturated", "too-long", "empty"],
)
def test_gate_errors(samples, needle):
    v = judge(checkids.AUDIO_GATES, OutputsObservation(SERVER, (req(TEXTS[0], samples),), pcm=True))
    assert v.outcome == FAILED and needle in v.findings[0].text, v.message()


def test_gate_warnings_do_not_fail():
    half = voice(16000)
    half[:9000] = 0  # 56% silence: more than the calibrated limit, less than all
    v = judge(checkids.AUDIO_GATES, OutputsObservation(SERVER, (req(TEXTS[1], half),)))
    assert v.passed and any("silence (limit" in w.text for w in v.warnings)
    assert "warning: " in v.message()


# ------------------------------------------------------------------------------------------ replays and seams


def stream(got: RequestAudio, whole: RequestAudio | None = None, **kw) -> StreamObservation:
    return StreamObservation(SERVER, (StreamPair("stream (sse)", got, whole or req(got.text), **kw),))


def test_a_stream_that_plays_each_piece_once_passes():
    assert judge(checkids.I1_NO_REPLAY, stream(req(TEXTS[1]))).passed


def test_a_replayed_piece_is_named_with_its_times_and_the_streaming_path_blamed():
    whole = AUDIO[TEXTS[1]]
    got = np.concatenate([whole[: 3 * CHUNK], whole[CHUNK : 2 * CHUNK], whole[3 * CHUNK :]])
    v = judge(checkids.I1_NO_REPLAY, stream(req(TEXTS[1], got)))
    assert v.outcome == FAILED
    text = v.findings[0].text
    assert "REPLAY: stream samples 3840..5120 (0.240-0.320 s) (streamed piece 3) repeat its samples 1280..2560" in text
    assert "the model emits it" not in text  # the whole does not repeat it: the streaming path does
    row = v.metrics["replays"][0]
    assert (row["start_s"], row["end_s"], row["source_s"], row["text"]) == (0.24, 0.32, 0.08, TEXTS[1])


def test_a_replay_the_whole_has_too_is_the_models():
    whole = np.concatenate([AUDIO[TEXTS[1]], AUDIO[TEXTS[1]]])
    v = judge(checkids.I1_NO_REPLAY, stream(req(TEXTS[1], whole), req(TEXTS[1], whole)))
    assert v.outcome == FAILED and "the whole output repeats it too: the model emits it" in v.findings[0].text


def test_the_stream_vs_whole_diagnosis_locates_the_replay():
    whole = AUDIO[TEXTS[1]]
    got = np.concatenate([whole, whole])
    v = judge(checkids.I1_STREAM_EQUALS_OFFLINE, stream(req(TEXTS[1], got)))
    assert v.outcome == FAILED
    assert f"REPLAY: stream samples {whole.size}..{2 * whole.size}" in v.findings[0].text
    assert "repeat the whole output's samples 0.." in v.findings[0].text


def test_continuous_seams_pass_and_faded_seams_are_named_with_their_times():
    pairs = [StreamPair(t, req(t), req(t)) for t in TEXTS]
    assert judge(checkids.I1_SEAMS, StreamObservation(SERVER, tuple(pairs))).passed
    faded = [StreamPair(t, req(t, fade(AUDIO[t], sizes(AUDIO[t].size))), req(t)) for t in TEXTS]
    v = judge(checkids.I1_SEAMS, StreamObservation(SERVER, tuple(faded)))
    assert v.outcome == FAILED and v.metrics["share"] > 0.9
    assert "'Hello there.': SEAM GLITCH at 7 of 7 seams: 0.080 s, 0.160 s, 0.240 s" in v.findings[0].text
    assert v.metrics["flagged_seams"][0]["time_s"] == 0.08


def test_seams_of_a_raw_audio_stream_are_not_judged():
    v = judge(checkids.I1_SEAMS, stream(req(TEXTS[1]), transport=True))
    assert v.outcome == NOT_APPLICABLE and "transport reads" in v.headline


# ------------------------------------------------------------------------------------------ whose audio


def test_a_peers_voice_is_named():
    solo = tuple(req(t) for t in TEXTS)
    leaked = req(TEXTS[2], AUDIO[TEXTS[0]][: AUDIO[TEXTS[2]].size])  # 'Third one!' speaks 'Hello there.'
    rnd = ConcurrentRound("4 at once", (req(TEXTS[0]), req(TEXTS[1]), leaked, req(TEXTS[3])))
    v = judge(checkids.I4_CONCURRENCY, ConcurrencyObservation(SERVER, solo, (rnd,)))
    assert v.outcome == FAILED
    assert "heard: samples 0..7680 (0.000-0.480 s) are 'Hello there.''s samples 0..7680" in v.findings[0].text
    assert v.metrics["attributions"][0]["text"] == TEXTS[2]


# ------------------------------------------------------------------------------------------ fixed seed


def seeded(rounds, reseeded=None) -> SeedObservation:
    solo = tuple(req(t) for t in TEXTS)
    seeds = {a.request: 1234 + i for i, a in enumerate(solo)}
    return SeedObservation(SERVER, solo, seeds, rounds, reseeded)


def test_a_seeded_request_batched_as_alone_passes_and_says_if_the_seed_matters():
    rounds = (ConcurrentRound("at once", tuple(req(t) for t in TEXTS)),)
    v = judge(checkids.I4_SEED_DETERMINISM, seeded(rounds, req(TEXTS[0])))
    assert v.passed and "does not depend on the seed" in v.headline
    v = judge(checkids.I4_SEED_DETERMINISM, seeded(rounds, req(TEXTS[0], AUDIO[TEXTS[3]])))
    assert v.passed and "another seed changes the audio" in v.headline


def test_a_seeded_request_that_changes_in_a_batch_fails_naming_its_peers():
    redrawn = req(TEXTS[1], pcm16(voice(AUDIO[TEXTS[1]].size, seed=99)))
    rounds = (ConcurrentRound("4 seeded at once", (req(TEXTS[0]), redrawn, req(TEXTS[2]), req(TEXTS[3]))),)
    v = judge(checkids.I4_SEED_DETERMINISM, seeded(rounds))
    assert v.outcome == FAILED
    text = v.findings[0].text
    assert text.startswith("[4 seeded at once] SEED IGNORED IN A BATCH:") and "(seed 1235)" in text
    assert "batched with 'Hello there.' (seed 1234)" in text and "drawn from another random stream" in text


def test_no_seed_field_is_not_applicable():
    v = judge(checkids.I4_SEED_DETERMINISM, SeedObservation(SERVER, unavailable="no `seed` field"))
    assert v.outcome == NOT_APPLICABLE


# ------------------------------------------------------------------------------------------ aborts


def snapshot(*keys: str, nbytes: int = 0) -> StateSnapshot:
    held = Container("stage0:Model._streams", len(keys), keys, nbytes)
    return StateSnapshot((WorkerState((held,)),))


def aborts(after: StateSnapshot, memory_after: Memory, attempts=None) -> AbortObservation:
    attempts = attempts or tuple(AbortAttempt(f"after {k} chunks", f"r{k}", k, True) for k in (1, 4, 8) * 3)
    ids = {f"req-{i}-abcdef12": "scheduler id of an aborted request" for i in range(9)}
    return AbortObservation(attempts, snapshot(), after, (Memory(10**8, 0),), (memory_after,), ids)


def test_aborts_that_leave_nothing_pass():
    v = judge(checkids.I5_ABORT_RECOVERY, aborts(snapshot(), Memory(10**8 + 2**20, 0)))
    assert v.passed and "9 aborts (9 mid-stream" in v.headline


def test_an_aborted_requests_state_is_named_with_its_memory():
    after = snapshot("req-3-abcdef12", "req-5-abcdef12", nbytes=2 * 23808)
    v = judge(checkids.I5_ABORT_RECOVERY, aborts(after, Memory(10**8, 2 * 23808)))
    assert v.outcome == FAILED
    said = v.message()
    assert "after 9 aborts: stage0:Model._streams still holds 'req-3-abcdef12'" in said
    assert "the model holds +46.5 KiB of tensors more than before the aborts" in said
    assert "0 -> 2 entries" in said


def test_aborts_that_never_interrupted_a_stream_fail_and_rss_has_a_tolerance():
    finished = tuple(AbortAttempt("after 9 chunks", "r", 9, False) for _ in range(3))
    v = judge(checkids.I5_ABORT_RECOVERY, aborts(snapshot(), Memory(10**8, 0), finished))
    assert v.outcome == FAILED and "nothing was interrupted" in v.message()
    v = judge(checkids.I5_ABORT_RECOVERY, aborts(snapshot(), Memory(10**8 + 2**30, 0)))
    assert v.outcome == FAILED and "resident memory +1024.00 MiB over the baseline" in v.message()
    assert judge(checkids.I5_ABORT_RECOVERY, AbortObservation(unavailable="no rpc")).outcome == NOT_APPLICABLE
