"""Pure comparison functions between a reference capture and an integration's outputs (arrays in, typed results out).

No I/O and no judgement beyond the numbers: the parity verdicts (``validators/verdicts/parity.py``) call these with
the dtype's tolerance from the one tolerance table (``validators/verdicts/tolerances.py``).

* :func:`compare_codes`: codes frame by frame: how many frames agree, the first divergent frame and codebook, and
  which named by-design difference of the release (a :class:`KnownDifference`) explains it, if one does;
* :func:`teacher_forced_topk` / :func:`free_running_topk`: the criterion where bf16 makes free-running codes drift
  apart (as vLLM's ``check_logprobs_close`` for text models): every code of the integration within the reference's
  top-k under teacher forcing, or, free running, the first divergence within each side's top-k and nothing after;
* :func:`compare_waveforms`: end to end (length, max |diff|, SNR); the same function on the decoder alone (the
  reference's codes through both decoders) tells a drifting generator from a drifting codec or dtype
  (:func:`locate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from omnitts.knowledge.references import KnownDifference


@dataclass(frozen=True)
class CodesComparison:
    frames_ref: int
    frames_got: int
    codebooks_ref: int
    codebooks_got: int
    agreeing_prefix: int  # frames equal from frame 0 up to the first divergence
    equal_frames: int  # frames equal at the same index, over the shorter sequence
    first_divergence: tuple[int, int] | None  # (frame, codebook); codebook -1: one sequence ended there
    known: KnownDifference | None = None  # the by-design difference that explains the first divergence

    @property
    def equal(self) -> bool:
        return self.first_divergence is None

    def describe(self) -> str:
        head = f"{self.agreeing_prefix}/{self.frames_ref} frames agree"
        if self.codebooks_ref != self.codebooks_got:
            return f"codebooks differ: reference {self.codebooks_ref}, integration {self.codebooks_got}"
        if self.equal:
            return f"codes equal: {self.frames_ref} frames x {self.codebooks_ref} codebooks"
        frame, codebook = self.first_divergence
        where = (
            f"the sequences end differently at frame {frame} (reference {self.frames_ref}, "
            f"integration {self.frames_got} frames)"
            if codebook < 0
            else f"first divergence at frame {frame}, codebook {codebook}"
        )
        known = f"; explained by the known difference {self.known.id}: {self.known.description}" if self.known else ""
        return f"{head}; {where}; {self.equal_frames} frames equal at the same index{known}"


def _codes(array, what: str) -> np.ndarray:
    codes = np.asarray(array)
    if codes.ndim != 2:
        raise ValueError(f"{what}: codes must be [frames, codebooks], got shape {codes.shape}")
    return codes.astype(np.int64)


def compare_codes(ref, got, known: tuple[KnownDifference, ...] = ()) -> CodesComparison:
    """Codes ``[frames, codebooks]`` of the reference and of the integration, frame by frame."""
    ref, got = _codes(ref, "reference"), _codes(got, "integration")
    (fr, qr), (fg, qg) = ref.shape, got.shape
    if qr != qg:
        return CodesComparison(fr, fg, qr, qg, 0, 0, (0, min(qr, qg)))
    n = min(fr, fg)
    same = np.all(ref[:n] == got[:n], axis=1)
    equal_frames = int(same.sum())
    bad = np.flatnonzero(~same)
    if bad.size:
        frame = int(bad[0])
        codebook = int(np.flatnonzero(ref[frame] != got[frame])[0])
        divergence = (frame, codebook)
    elif fr != fg:
        frame, divergence = n, (n, -1)
    else:
        frame, divergence = n, None
    explained = None
    if divergence is not None:
        explained = next((k for k in known if k.explains(ref, divergence[0])), None)
    return CodesComparison(fr, fg, qr, qg, frame if divergence else n, equal_frames, divergence, explained)


@dataclass(frozen=True)
class TopKComparison:
    k: int
    frames: int
    frames_within: int  # frames whose every code lies in the other side's top-k (up to where the check stops)
    first_outside: tuple[int, int] | None  # (frame, codebook) of the first code outside the top-k
    stopped_at: int | None = None  # free running: the first divergent frame (nothing after it is comparable)

    @property
    def within(self) -> bool:
        return self.first_outside is None

    def describe(self) -> str:
        if self.within:
            stop = f" up to the first divergence at frame {self.stopped_at}" if self.stopped_at is not None else ""
            return f"every code within the top-{self.k}{stop} ({self.frames_within}/{self.frames} frames)"
        frame, codebook = self.first_outside
        return (
            f"frame {frame}, codebook {codebook}: code outside the other side's top-{self.k} "
            f"({self.frames_within}/{self.frames} frames within before it)"
        )


def teacher_forced_topk(ref_topk, got) -> TopKComparison:
    """``ref_topk``: ``[frames, codebooks, k]`` ids of the reference's k best codes, computed with the integration's
    codes ``got`` (``[frames, codebooks]``) as its previous outputs; every integration code must be among them."""
    topk, codes = np.asarray(ref_topk), _codes(got, "integration")
    if topk.ndim != 3 or topk.shape[:2] != codes.shape:
        raise ValueError(f"top-k {topk.shape} does not fit codes {codes.shape}")
    inside = np.any(topk == codes[:, :, None], axis=2)
    ok_frames = np.all(inside, axis=1)
    bad = np.flatnonzero(~ok_frames)
    first = None
    if bad.size:
        frame = int(bad[0])
        first = (frame, int(np.flatnonzero(~inside[frame])[0]))
    within = int(bad[0]) if bad.size else len(codes)
    return TopKComparison(topk.shape[2], len(codes), within, first)


def free_running_topk(ref, ref_topk, got, got_topk=None) -> TopKComparison:
    """vLLM's ``check_logprobs_close`` for codes: walk the frames while both sides agree; at the first divergent
    frame each side's code must be in the other's top-k (``got_topk`` may be None: only the reference's is checked),
    and the comparison stops there, because everything after depends on the different choice."""
    ref, got = _codes(ref, "reference"), _codes(got, "integration")
    topk = np.asarray(ref_topk)
    k = topk.shape[2]
    n = min(len(ref), len(got))
    for frame in range(n):
        diff = np.flatnonzero(ref[frame] != got[frame])
        if not diff.size:
            continue
        codebook = int(diff[0])
        ok = got[frame, codebook] in topk[frame, codebook]
        if got_topk is not None:
            ok = ok and ref[frame, codebook] in np.asarray(got_topk)[frame, codebook]
        return TopKComparison(k, n, frame, None if ok else (frame, codebook), stopped_at=frame)
    return TopKComparison(k, n, n, None)


@dataclass(frozen=True)
class WaveComparison:
    samples_ref: int
    samples_got: int
    max_abs_diff: float  # over the common length; inf when either is empty
    snr_db: float  # reference power over difference power (inf: identical)
    atol: float

    @property
    def same_length(self) -> bool:
        return self.samples_ref == self.samples_got

    @property
    def within(self) -> bool:
        return self.same_length and self.max_abs_diff <= self.atol

    def describe(self) -> str:
        length = (
            f"{self.samples_ref} samples"
            if self.same_length
            else f"length {self.samples_got} vs reference {self.samples_ref}"
        )
        return f"{length}, max |diff| {self.max_abs_diff:.3g} (atol {self.atol:g}), SNR {self.snr_db:.1f} dB"


def compare_waveforms(ref, got, *, atol: float) -> WaveComparison:
    ref = np.asarray(ref, dtype=np.float64).reshape(-1)
    got = np.asarray(got, dtype=np.float64).reshape(-1)
    n = min(ref.size, got.size)
    if n == 0:
        return WaveComparison(ref.size, got.size, math.inf, -math.inf, atol)
    diff = ref[:n] - got[:n]
    max_abs = float(np.max(np.abs(diff)))
    noise, power = float(np.sum(diff**2)), float(np.sum(ref[:n] ** 2))
    snr = math.inf if noise == 0 else (10 * math.log10(power / noise) if power > 0 else -math.inf)
    return WaveComparison(ref.size, got.size, max_abs, snr, atol)


def locate(codes: CodesComparison | None, decoder: WaveComparison | None, end_to_end: WaveComparison) -> str:
    """Where a divergence starts: ``generator`` (codes differ), ``decoder`` (same codes, the decoder alone differs:
    codec port or dtype), ``hand-over`` (codes and decoder alone agree, end to end does not: what lies between, e.g.
    trimming or frames dropped on the way), or ``none``."""
    if codes is not None and not codes.equal:
        return "generator"
    if decoder is not None and not decoder.within:
        return "decoder"
    if not end_to_end.within:
        return "hand-over"
    return "none"
