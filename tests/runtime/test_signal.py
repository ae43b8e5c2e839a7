"""The weight-free signal analysis behind the diagnostics: repeats found by cross-correlation (not by equality),
a stream aligned against its whole, seams judged against the stream's own interior, attribution, the gates' numbers.
Each finder has a VALID case (correct audio: nothing found) and INVALID ones (the bug class it exists for)."""

from __future__ import annotations

import numpy as np
import pytest

from omnitts.validators.verdicts import signal

SR = 16000
CHUNK = 1280


def voice(n: int, seed: int = 0) -> np.ndarray:
    """Speech-like audio without a period: noise through a short smoothing filter, amplitude-modulated."""
    rng = np.random.default_rng(seed)
    x = np.convolve(rng.normal(0, 1, n + 15), np.hanning(16), mode="valid")[:n]
    envelope = 0.5 + 0.4 * np.sin(np.arange(n) * 2 * np.pi / 4000)
    return (0.2 * x / x.std() * envelope).astype(np.float32)


def pcm16(x: np.ndarray) -> np.ndarray:
    return (np.round(np.clip(x, -1, 1) * 32767) / 32768).astype(np.float32)


def sizes(n: int, chunk: int = CHUNK) -> list[int]:
    return [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])


WHOLE = voice(10 * CHUNK)


# ------------------------------------------------------------------------------------------ repeats


def test_a_correct_stream_repeats_nothing():
    scan = signal.find_repeats(WHOLE, SR, sizes(WHOLE.size))
    assert scan.repeats == () and scan.windows > 50 and scan.periodic == 0


def test_a_replayed_chunk_is_found_with_where_it_was_heard_first():
    got = np.concatenate([WHOLE[: 4 * CHUNK], WHOLE[2 * CHUNK : 3 * CHUNK], WHOLE[4 * CHUNK :]])
    scan = signal.find_repeats(got, SR, [*sizes(4 * CHUNK), CHUNK, *sizes(6 * CHUNK)])
    (r,) = scan.repeats
    assert (r.start, r.length, r.source, r.chunk) == (4 * CHUNK, CHUNK, 2 * CHUNK, 4)
    text = r.describe(SR)
    assert "samples 5120..6400 (0.320-0.400 s)" in text and "its samples 2560..3840 (0.160-0.240 s)" in text


def test_a_doubled_stream_is_found_through_16_bit_pcm():
    """Equality within a tolerance fails on re-quantised audio; correlation does not."""
    got = pcm16(np.concatenate([WHOLE, WHOLE * 0.9999]))
    scan = signal.find_repeats(got, SR, [*sizes(WHOLE.size)[:-1], CHUNK + WHOLE.size])
    (r,) = scan.repeats
    assert r.start == WHOLE.size and r.source == 0 and r.length >= WHOLE.size - 2


def test_a_tone_is_not_a_replay_and_silence_is_not_judged():
    tone = (0.3 * np.sin(2 * np.pi * 200 * np.arange(8 * CHUNK) / SR)).astype(np.float32)
    scan = signal.find_repeats(tone, SR, sizes(tone.size))
    assert scan.repeats == () and scan.periodic > 0
    quiet = np.zeros(8 * CHUNK, dtype=np.float32)
    quiet_scan = signal.find_repeats(quiet, SR, sizes(quiet.size))
    assert quiet_scan.repeats == () and quiet_scan.windows == 0


def test_a_stream_without_piece_sizes_is_scanned_in_windows():
    got = np.concatenate([WHOLE, WHOLE[:3000]])
    (r,) = signal.find_repeats(got, SR).repeats
    assert r.source == 0 and r.start == WHOLE.size and r.length == 3000 and r.chunk is None


# ------------------------------------------------------------------------------------------ alignment


@pytest.mark.parametrize(
    "got, kinds, needle",
    [
        (WHOLE, ["same"], None),
        (
            np.concatenate([WHOLE[:3000], WHOLE[1000:3000], WHOLE[3000:]]),
            ["same", "replay", "same"],
            "REPLAY: stream samples 3000..5000 (0.188-0.312 s) repeat the whole's samples 1000..3000",
        ),
        (
            np.concatenate([WHOLE[:3000], WHOLE[5000:]]),
            ["same", "skip", "same"],
            "SKIPPED: the whole's samples 3000..5000 (0.188-0.312 s) never streamed",
        ),
        (WHOLE[:9000], ["same", "missing"], "TRUNCATED: the whole's samples 9000..12800 (0.562-0.800 s)"),
        (
            np.concatenate([WHOLE[:3000], voice(2000, seed=7), WHOLE[5000:]]),
            ["same", "differs", "same"],
            "DIFFERS: stream samples 3000..5000",
        ),
    ],
    ids=["equal", "replay", "skip", "truncated", "other-audio"],
)
def test_a_stream_is_walked_against_its_whole(got, kinds, needle):
    spans = signal.align(pcm16(got), pcm16(WHOLE), SR)
    assert [s.kind for s in spans] == kinds
    lines = signal.describe_spans(spans, SR)
    assert (needle is None and not lines) or any(line.startswith(needle) for line in lines), lines


# ------------------------------------------------------------------------------------------ seams


def fade(x: np.ndarray, pieces: list[int], n: int = 64) -> np.ndarray:
    y, pos = x.copy(), 0
    for size in pieces:
        ramp = np.linspace(0, 1, min(n, size // 2))
        y[pos : pos + ramp.size] *= ramp
        y[pos + size - ramp.size : pos + size] *= ramp[::-1]
        pos += size
    return y


@pytest.mark.parametrize("audio", [WHOLE, voice(10 * CHUNK, seed=3), np.random.default_rng(5).normal(0, 0.3, 12800)])
def test_seams_of_a_continuous_stream_do_not_stand_out(audio):
    report = signal.seam_report(audio.astype(np.float32), SR, sizes(audio.size))
    assert len(report.seams) == 9 and len(report.flagged) <= 1


@pytest.mark.parametrize("audio", [WHOLE, np.random.default_rng(5).normal(0, 0.3, 12800).astype(np.float32)])
def test_a_fade_at_every_seam_is_flagged_with_its_time(audio):
    pieces = sizes(audio.size)
    report = signal.seam_report(fade(audio, pieces), SR, pieces)
    assert len(report.flagged) == 9
    assert [s.sample for s in report.flagged] == [CHUNK * k for k in range(1, 10)]
    assert all(s.energy_db < -6 for s in report.flagged)


def test_a_step_at_the_seams_of_smooth_audio_is_flagged():
    smooth = (0.3 * np.sin(np.arange(10 * CHUNK) * 2 * np.pi / 1777)).astype(np.float32)
    stepped = smooth.copy()
    for k in range(1, 10):
        stepped[k * CHUNK :] += 0.05 * (-1) ** k
    report = signal.seam_report(stepped, SR, sizes(stepped.size))
    assert len(report.flagged) == 9 and all(s.jump > report.jump_limit for s in report.flagged)


def test_seams_in_silence_are_not_judged():
    quiet = np.zeros(10 * CHUNK, dtype=np.float32)
    assert signal.seam_report(quiet, SR, sizes(quiet.size)).seams == ()


# ------------------------------------------------------------------------------------------ attribution


def test_a_peers_audio_is_named_with_its_span():
    peer = voice(6000, seed=11)
    got = np.concatenate([WHOLE[:2000], peer[:4000]])
    heard = signal.attribute(pcm16(got), {"'a'": WHOLE, "'b'": peer}, SR, start=1920)
    assert [(h.source, h.a, h.c) for h in heard] == [("'b'", 2000, 0)]
    lines = signal.describe_heard(heard, SR, "'a'")
    assert "samples 2000..6000 (0.125-0.375 s) are 'b''s samples 0..4000 (0.000-0.250 s)" in lines[0]


def test_own_audio_shifted_is_named_as_such():
    got = np.concatenate([np.zeros(640, dtype=np.float32), WHOLE[:5000]])
    heard = signal.attribute(got, {"'a'": WHOLE}, SR)
    assert heard[0].source == "'a'" and heard[0].a - heard[0].c == 640
    assert "shifted by 640 samples" in signal.describe_heard(heard, SR, "'a'")[0]


# ------------------------------------------------------------------------------------------ gates


def test_gate_statistics():
    stats = signal.gate_stats(WHOLE, SR, chars=20)
    assert stats["silence_ratio"] == 0 and stats["clipping_ratio"] == 0 and stats["seconds_per_char"] == 0.04
    silent = signal.gate_stats(np.zeros(SR, dtype=np.float32), SR, 10)
    assert silent["silence_ratio"] == 1.0 and silent["peak"] == 0
    clipped = signal.gate_stats(np.sign(WHOLE), SR)
    assert clipped["clipping_ratio"] == 1.0 and clipped["seconds_per_char"] is None
    assert signal.nonfinite(WHOLE) is None
    bad = WHOLE.copy()
    bad[[5, 9]] = [np.nan, np.inf]
    assert signal.nonfinite(bad) == (2, 5)
