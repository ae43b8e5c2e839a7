"""Name what went wrong when two waveforms differ: replay, truncation, crosstalk, the first differing sample.

The one audio comparator of every verdict (numpy, float32 mono). ``deltas`` are the streamed pieces of ``got``: a
difference is placed in the step that streamed it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

DISTINCT_ATOL = 1e-3  # two texts whose audio is this close gave the same audio


@dataclass(frozen=True)
class Comparison:
    equal: bool
    exact: bool
    max_abs: float
    first_diff: int | None  # first sample index that differs beyond tolerance
    len_got: int
    len_want: int
    verdict: str  # one-line diagnosis

    def __bool__(self) -> bool:
        return self.equal


def _flat(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).reshape(-1)


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    return np.abs(a - b) <= atol + rtol * np.abs(b)


def first_divergence(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> int | None:
    n = min(a.size, b.size)
    if n:
        bad = np.flatnonzero(~_close(a[:n], b[:n], rtol, atol))
        if bad.size:
            return int(bad[0])
    return n if a.size != b.size else None


def find_segment(seg: np.ndarray, hay: np.ndarray, rtol: float, atol: float, exclude: int | None = None) -> int | None:
    """Offset of ``seg`` inside ``hay`` (within tolerance), preferring offsets != ``exclude``."""
    w = seg.size
    if w == 0 or hay.size < w:
        return None
    windows = np.lib.stride_tricks.sliding_window_view(hay, w)
    ok = np.flatnonzero((np.abs(windows - seg) <= atol + rtol * np.abs(seg)).all(axis=1)).tolist()
    if not ok:
        return None
    others = [o for o in ok if o != exclude]
    return (others or ok)[0]


def step_of(sample: int, deltas: list[np.ndarray]) -> int | None:
    pos = 0
    for j, d in enumerate(deltas):
        pos += d.size
        if sample < pos:
            return j
    return None


def compare(
    got,
    want,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    deltas: list | None = None,
    what: str = "stream",
    ref: str = "reference",
) -> Comparison:
    a, b = _flat(got), _flat(want)
    n = min(a.size, b.size)
    max_abs = float(np.abs(a[:n] - b[:n]).max()) if n else 0.0
    exact = a.size == b.size and bool(np.array_equal(a, b))
    p = first_divergence(a, b, rtol, atol)
    if p is None:
        how = " bit-exactly" if exact else f" within rtol={rtol:g}, atol={atol:g} (max |diff| {max_abs:.3g})"
        return Comparison(True, exact, max_abs, None, a.size, b.size, f"{what} equals {ref}{how}")
    where = ""
    if deltas:
        j = step_of(p, [_flat(d) for d in deltas])
        if j is not None:
            where = f" (step {j} of {len(deltas)})"
    w = max(1, min(64, a.size - p, b.size))
    if a.size > b.size:
        q = find_segment(a[p : p + w], b, rtol, atol, exclude=p)
        if q is not None and q < p:
            verdict = (
                f"REPLAY: {what} has {a.size} samples, {ref} {b.size}; from sample {p}{where} it re-emits {ref}"
                f" samples from {q} on (already streamed) - cumulative output where delta is expected"
            )
        else:
            extra = a.size - b.size
            verdict = f"EXTRA AUDIO: {what} has {extra} samples more than {ref}; first difference at sample {p}{where}"
    elif a.size < b.size:
        seg = a[p : p + w]
        q = find_segment(seg, b, rtol, atol, exclude=p) if seg.size else None
        if p >= a.size:
            verdict = (
                f"TRUNCATION: {what} stops at sample {a.size}{where}; {ref} has {b.size} "
                f"({b.size - a.size} missing at the end)"
            )
        elif q is not None and q > p:
            verdict = (
                f"TRUNCATION: {ref} samples {p}..{q} are missing from {what} at sample {p}{where} "
                "(audio skipped: state reset or codes not accumulated)"
            )
        else:
            verdict = f"TRUNCATION: {what} has {a.size} samples, {ref} {b.size}; first difference at sample {p}{where}"
    else:
        verdict = (
            f"MISMATCH: same length ({a.size}), first difference at sample {p}{where}, "
            f"max |diff| {max_abs:.3g} (rtol={rtol:g}, atol={atol:g})"
        )
    return Comparison(False, False, max_abs, p, a.size, b.size, verdict)


def detect_replay(deltas: list, rtol: float = 1e-4, atol: float = 1e-5) -> str | None:
    """Cumulative output: each delta starts with (or is) the previous one, or with what was already streamed."""
    ds = [_flat(d) for d in deltas if np.size(d)]
    if len(ds) < 3:
        return None
    hits = sum(
        1
        for prev, cur in itertools.pairwise(ds)
        if cur.size > prev.size and bool(_close(cur[: prev.size], prev, rtol, atol).all())
    )
    if hits >= max(2, (len(ds) - 1) * 3 // 4):
        return (
            f"REPLAY: {hits} of {len(ds) - 1} deltas start with the previous delta (cumulative re-decoding from step 0)"
        )
    return None


def crosstalk(got, own_solo, solos: dict, me: str, deltas: list | None, rtol: float, atol: float) -> str:
    """Which request's audio ``me`` received, chunk by chunk, when it differs from its solo run."""
    a, own = _flat(got), _flat(own_solo)
    chunks = [_flat(d) for d in deltas] if deltas else [a]
    pos, notes = 0, []
    for j, c in enumerate(chunks):
        n = c.size
        if n == 0:
            continue
        ref = own[pos : pos + n]
        if ref.size == n and bool(_close(c, ref, rtol, atol).all()):
            pos += n
            continue
        source = None
        for other, s in solos.items():
            if other == me:
                continue
            sf = _flat(s)
            seg = sf[pos : pos + n]
            if seg.size == n and bool(_close(c, seg, rtol, atol).all()):
                source = f"{other} (same offset {pos})"
                break
            off = find_segment(c[: min(n, 64)], sf, rtol, atol)
            if off is not None:
                source = f"{other} (its samples {off}..{off + n})"
                break
        if source is None:
            off = find_segment(c[: min(n, 64)], own, rtol, atol)
            source = (
                f"its own audio from sample {off} (shifted)" if off is not None else "nobody's solo audio (corrupted)"
            )
        notes.append(f"step {j} samples {pos}..{pos + n}: received {source}")
        pos += n
        if len(notes) >= 4:
            break
    return "; ".join(notes) if notes else "no chunk differs (length mismatch only)"


def same_audio(named: dict[str, np.ndarray], atol: float = DISTINCT_ATOL) -> list[str]:
    """Pairs of distinct inputs that gave the same audio (same length, equal within ``atol``; no audio at all is
    another finding: the duration checks')."""
    same = []
    for (ta, a), (tb, b) in itertools.combinations(named.items(), 2):
        if a.size and a.shape == b.shape and np.allclose(a, b, atol=atol):
            same.append(f"{ta} and {tb} give the same audio ({a.size} samples)")
    return same


def truncated_or_replayed(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """The kind of difference of a stream against the whole: truncated, replayed/extra, or different audio."""
    if got.size < want.size and first_divergence(got, want[: got.size], rtol, atol) is None:
        return "truncated"
    return "replayed/extra audio" if got.size > want.size else "different audio"


def nondeterminism(repeat, rtol: float, atol: float) -> str | None:
    """Why equality cannot be checked, when the same request asked twice alone gave different audio (None: it gave
    the same, or was not asked twice)."""
    if repeat is None:
        return None
    if repeat.again is not None:
        cmp = compare(repeat.again.samples, repeat.first.samples, rtol, atol)
        if cmp:
            return None
    how = repeat.error if repeat.again is None else cmp.verdict
    return (
        f"two identical solo requests differ ({how}): the server is not deterministic, so equality cannot be "
        "checked; make it so (e.g. --seed 0, or greedy sampling in --extra)"
    )
