"""The pure comparison functions of reference parity: each proven on a case it must pass and on the bug it must
name (first divergent frame and codebook, top-k criterion, waveform length / max |diff| / SNR, where it starts)."""

from __future__ import annotations

import math

import numpy as np

from omnitts.validators.parity.compare import (
    KnownDifference,
    compare_codes,
    compare_waveforms,
    free_running_topk,
    locate,
    teacher_forced_topk,
)

RNG = np.random.default_rng(0)
CODES = RNG.integers(1, 2048, size=(23, 4))


def test_equal_codes_pass():
    found = compare_codes(CODES, CODES.copy())
    assert found.equal and found.agreeing_prefix == 23 and found.equal_frames == 23
    assert found.describe() == "codes equal: 23 frames x 4 codebooks"


def test_first_divergent_frame_and_codebook_are_named():
    got = CODES.copy()
    got[7, 2] += 1
    got[12, 0] += 1
    found = compare_codes(CODES, got)
    assert not found.equal
    assert found.first_divergence == (7, 2) and found.agreeing_prefix == 7 and found.equal_frames == 21
    assert "frame 7, codebook 2" in found.describe()


def test_swapped_codebooks_diverge_at_frame_zero():
    got = CODES[:, [0, 2, 1, 3]]
    assert compare_codes(CODES, got).first_divergence == (0, 1)


def test_length_difference_is_a_divergence():
    found = compare_codes(CODES, CODES[:20])
    assert found.first_divergence == (20, -1) and found.equal_frames == 20
    assert "end differently at frame 20" in found.describe()


def test_codebook_count_mismatch():
    found = compare_codes(CODES, CODES[:, :3])
    assert not found.equal and "codebooks differ" in found.describe()


def test_known_difference_is_named_not_tolerated():
    zero0 = KnownDifference("x.codebook0_zero", "the release never emits code 0 in codebook 0", codebook=0, codes=(0,))
    ref = CODES.copy()
    ref[5, 0] = 0
    got = CODES.copy()  # the integration picked something else where the reference emitted 0
    found = compare_codes(ref, got, known=(zero0,))
    assert not found.equal, "a known difference still fails the equality"
    assert found.known is zero0 and "x.codebook0_zero" in found.describe()
    other = CODES.copy()
    other[5, 1] += 1  # a divergence the known difference does not explain
    assert compare_codes(CODES, other, known=(zero0,)).known is None


def test_teacher_forced_topk():
    topk = np.stack([CODES, CODES + 1, CODES + 2], axis=2)
    assert teacher_forced_topk(topk, CODES).within
    got = CODES.copy()
    got[3, 1] += 2  # second runner-up: still within the top-3
    assert teacher_forced_topk(topk, got).within
    got[9, 3] += 10
    found = teacher_forced_topk(topk, got)
    assert found.first_outside == (9, 3) and found.frames_within == 9


def test_free_running_topk_stops_at_the_first_divergence():
    ref_topk = np.stack([CODES, CODES + 1], axis=2)
    got = CODES.copy()
    got[15:, :] = 7  # diverges at frame 15 to code 7 in codebook 0
    got[15, 0] = CODES[15, 0] + 1  # a close call: the reference's runner-up
    found = free_running_topk(CODES, ref_topk, got)
    assert found.within and found.stopped_at == 15
    got[15, 0] = CODES[15, 0] + 5  # not among the reference's top-2
    bad = free_running_topk(CODES, ref_topk, got)
    assert bad.first_outside == (15, 0)
    # both sides' top-k: the reference's code must also be in the integration's
    got[15, 0] = CODES[15, 0] + 1
    got_topk = np.stack([got, got + 3], axis=2)
    assert free_running_topk(CODES, ref_topk, got, got_topk).first_outside == (15, 0)


def test_waveforms():
    wave = RNG.standard_normal(44160).astype(np.float32)
    same = compare_waveforms(wave, wave.copy(), atol=1e-5)
    assert same.within and same.snr_db == math.inf
    near = compare_waveforms(wave, wave + 1e-7, atol=1e-5)
    assert near.within and near.snr_db > 100
    off = compare_waveforms(wave, wave * 1.01, atol=1e-5)
    assert not off.within and 35 < off.snr_db < 45
    short = compare_waveforms(wave, wave[:-1920], atol=1e-5)
    assert not short.within and short.max_abs_diff == 0.0 and "length 42240 vs reference 44160" in short.describe()
    assert not compare_waveforms(wave, np.zeros(0), atol=1).within


def test_locate():
    wave = np.ones(10)
    ok = compare_waveforms(wave, wave, atol=1e-5)
    bad = compare_waveforms(wave, wave * 2, atol=1e-5)
    differ = compare_codes(CODES, CODES[:, [1, 0, 2, 3]])
    same = compare_codes(CODES, CODES)
    assert locate(differ, ok, bad) == "generator"
    assert locate(same, bad, bad) == "decoder"
    assert locate(same, ok, bad) == "hand-over"
    assert locate(same, ok, ok) == "none"
