"""Weight-free, sample-level analysis of audio (numpy only), what the diagnostics verdicts are made of.

* :func:`find_repeats`: spans of a stream that repeat audio heard before in the same stream, found by normalised
  cross-correlation (robust to bf16 re-decoding and 16-bit PCM, where equality within a tolerance is not);
* :func:`align`: a stream walked against its whole output, span by span (same, replayed, skipped, foreign);
* :func:`seam_report`: each chunk seam's discontinuity (an energy dip or burst, a jump of the waveform) against the
  same measures inside the chunks;
* :func:`attribute`: whose audio a request received (a peer's, an earlier request's, its own shifted);
* :func:`gate_stats`: the statistics of the audio gates (silence, clipping, DC offset, duration per character).

Nothing here needs a model or weights: a repeat is audio equal to earlier audio up to a small relative residual, a
seam is judged against the interior of the same stream. Times are in seconds when the sample rate is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SILENCE_RMS = 1e-3  # -60 dBFS: a window quieter than this is silence
CLIP_LEVEL = 0.999  # a sample at or beyond this magnitude is clipped
MATCH_CORR = 0.999  # normalised correlation of two spans that are one audio
MATCH_RESIDUAL = 0.02  # ... and the RMS of their difference over the span's RMS (PCM16 and bf16 stay far below)
PERIOD_S = 0.025  # a window that repeats itself within 25 ms is a tone (a pitch period), not a replay
MIN_REPEAT_WINDOWS = 2  # a repeat spans at least this many analysis windows


def flat(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).reshape(-1)


def window_for(sample_rate: int | None) -> int:
    """Analysis window: 8 ms (128 samples at 16 kHz), never under 64 samples."""
    return max(64, int(round(0.008 * (sample_rate or 16000))))


def at(sample: int, sample_rate: int | None) -> str:
    """``sample 2560 (0.160 s)``, or the sample alone when the rate is unknown."""
    return f"sample {sample} ({sample / sample_rate:.3f} s)" if sample_rate else f"sample {sample}"


def span(a: int, b: int, sample_rate: int | None) -> str:
    """``samples 2560..3840 (0.160-0.240 s)``."""
    if sample_rate:
        return f"samples {a}..{b} ({a / sample_rate:.3f}-{b / sample_rate:.3f} s)"
    return f"samples {a}..{b}"


def chunk_starts(sizes) -> np.ndarray:
    """The first sample of each streamed piece (``sizes``: samples per piece, in order)."""
    sizes = np.asarray(list(sizes), dtype=np.int64)
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]) if sizes.size else np.zeros(0, dtype=np.int64)


def chunk_of(sample: int, sizes) -> int | None:
    pos = 0
    for j, n in enumerate(sizes):
        pos += int(n)
        if sample < pos:
            return j
    return None


# ------------------------------------------------------------------------------------------ correlation


def ncc(seg: np.ndarray, hay: np.ndarray) -> np.ndarray:
    """Normalised cross-correlation of ``seg`` at every offset where it fits inside ``hay`` (FFT; 0 where ``hay``
    is silent)."""
    w, n = seg.size, hay.size - seg.size + 1
    if w == 0 or n <= 0:
        return np.zeros(0)
    size = 1 << int(math.ceil(math.log2(hay.size + w)))
    num = np.fft.irfft(np.fft.rfft(hay, size) * np.conj(np.fft.rfft(seg, size)), size)[:n]
    cum = np.concatenate([[0.0], np.cumsum(hay * hay)])
    den = np.sqrt(np.maximum(cum[w : w + n] - cum[:n], 0.0) * float(seg @ seg))
    out = np.zeros(n)
    ok = den > 1e-12
    out[ok] = num[ok] / den[ok]
    return out


def _audible(seg: np.ndarray) -> bool:
    """Loud enough and not constant: silence and DC repeat trivially."""
    return float(np.sqrt(np.mean(seg * seg))) >= SILENCE_RMS and float(seg.std()) >= SILENCE_RMS / 2


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """One audio: normalised correlation >= MATCH_CORR and a relative residual <= MATCH_RESIDUAL."""
    if a.size != b.size or a.size == 0:
        return False
    na, nb = float(np.sqrt(a @ a)), float(np.sqrt(b @ b))
    if na < 1e-12 or nb < 1e-12:
        return False
    return float(a @ b) / (na * nb) >= MATCH_CORR and float(np.sqrt(((a - b) ** 2).sum())) / na <= MATCH_RESIDUAL


def best_match(seg: np.ndarray, hay: np.ndarray) -> tuple[int, float] | None:
    """(offset, correlation) of the earliest best place ``seg`` is heard in ``hay`` as one audio, else None."""
    corr = ncc(seg, hay)
    if corr.size == 0:
        return None
    top = float(corr.max())
    if top < MATCH_CORR:
        return None
    for q in np.flatnonzero(corr >= top - 1e-6):  # earliest of the best
        if same(seg, hay[q : q + seg.size]):
            return int(q), float(corr[q])
    for q in np.argsort(-corr)[:8]:
        if corr[q] >= MATCH_CORR and same(seg, hay[q : q + seg.size]):
            return int(q), float(corr[q])
    return None


def periodic(x: np.ndarray, p: int, w: int, sample_rate: int | None) -> bool:
    """Whether the window at ``p`` repeats itself within a pitch period (a tone): such audio repeats by nature."""
    lag = int(PERIOD_S * (sample_rate or 16000))
    lo = max(0, p - lag)
    if p - lo < 2:
        return False
    corr = ncc(x[p : p + w], x[lo : p + w - 1])
    return bool(corr.size and corr[: p - lo].max(initial=0.0) >= MATCH_CORR)


def _extend(x: np.ndarray, p: int, q: int, w: int) -> tuple[int, int]:
    """The repeat of ``x[q:]`` at ``x[p:]`` (q < p) grown backward and forward window by window: (start, length)."""
    n = x.size
    a, b = p, p + w
    while a - w >= 0 and q - (p - a) - w >= 0 and same(x[a - w : a], x[q - (p - a) - w : q - (p - a)]):
        a -= w
    while b + w <= n and same(x[b : b + w], x[q + (b - p) : q + (b - p) + w]):
        b += w
    # the last partial window, sample by sample within the residual
    scale = float(np.sqrt(np.mean(x[a:b] ** 2))) if b > a else 0.0
    tol = 2 * MATCH_RESIDUAL * scale + 4e-5
    while b < n and abs(x[b] - x[q + (b - p)]) <= tol:
        b += 1
    while a > 0 and q - (p - a) > 0 and abs(x[a - 1] - x[q - (p - a) - 1]) <= tol:
        a -= 1
    return a, b - a


# ------------------------------------------------------------------------------------------ repeats in a stream


@dataclass(frozen=True)
class Repeat:
    """Stream samples ``start .. start + length`` repeat samples ``source ..`` heard earlier in the same stream."""

    start: int
    length: int
    source: int
    chunk: int | None = None  # the streamed piece it starts in

    def describe(self, sample_rate: int | None, what: str = "stream") -> str:
        where = f" (streamed piece {self.chunk})" if self.chunk is not None else ""
        return (
            f"{what} {span(self.start, self.start + self.length, sample_rate)}{where} repeat its "
            f"{span(self.source, self.source + self.length, sample_rate)}, already streamed "
            f"({self.length} samples" + (f", {self.length / sample_rate:.3f} s" if sample_rate else "") + ")"
        )


@dataclass(frozen=True)
class RepeatScan:
    repeats: tuple[Repeat, ...]
    windows: int  # windows analysed
    periodic: int  # windows skipped as tones (they repeat within a pitch period)
    covered: int  # samples the scan reached


def find_repeats(samples, sample_rate: int | None, sizes=(), budget: int = 400) -> RepeatScan:
    """Spans of the stream that repeat audio heard earlier in it. Windows are taken at each streamed piece's start
    and every ``max(w, piece / 8)`` samples inside it (every ``len / budget`` without pieces); each is looked for
    in what came before it and, when found, grown to the whole repeat."""
    x = flat(samples)
    w = window_for(sample_rate)
    sizes = [int(s) for s in sizes if int(s) > 0]
    if sizes and sum(sizes) == x.size:
        positions = []
        for s, n in zip(chunk_starts(sizes), sizes, strict=True):
            step = max(w, n // 8)
            positions += list(range(int(s), int(s) + n - w + 1, step))
    else:
        sizes = []
        positions = list(range(0, max(x.size - w + 1, 0), max(w, x.size // budget)))
    repeats: list[Repeat] = []
    skip_to, windows, tones, covered = 0, 0, 0, 0
    for p in positions:
        if p < skip_to or p < w:
            continue
        if windows >= budget:
            break
        seg = x[p : p + w]
        covered = p + w
        if not _audible(seg):
            continue
        windows += 1
        if periodic(x, p, w, sample_rate):
            tones += 1
            continue
        found = best_match(seg, x[:p])
        if found is None:
            continue
        a, m = _extend(x, p, found[0], w)
        if m < MIN_REPEAT_WINDOWS * w:
            continue
        source = found[0] - (p - a)
        repeats.append(Repeat(a, m, source, chunk_of(a, sizes) if sizes else None))
        skip_to = a + m
    return RepeatScan(tuple(repeats), windows, tones, max(covered, skip_to))


# ------------------------------------------------------------------------------------------ a stream vs its whole


@dataclass(frozen=True)
class Span:
    """One stretch of a stream against the whole output: ``kind`` is ``same`` (stream ``a..b`` = whole ``c..``),
    ``replay`` (repeats whole ``c..``, already streamed), ``skip`` (whole ``c..d`` never streamed), ``other``
    (audio the whole does not have), ``missing`` (the whole's ``c..d`` after the stream ended)."""

    kind: str
    a: int
    b: int
    c: int = 0
    d: int = 0


def _run(x: np.ndarray, y: np.ndarray, i: int, k: int, w: int) -> int:
    """Where the equal run of ``x[i:]`` against ``y[k:]`` ends (sample-precise): window by window while the two
    are one audio (or both silent), then sample by sample within the residual."""
    j = i
    while j + w <= x.size and k + (j - i) + w <= y.size:
        a, b = x[j : j + w], y[k + (j - i) : k + (j - i) + w]
        if not (same(a, b) or (not _audible(a) and not _audible(b) and np.abs(a - b).max() <= 4 * SILENCE_RMS)):
            break
        j += w
    end = min(x.size, y.size - k + i, j + w)
    ref = x[max(i, j - w) : end] if end > i else x[i : i + 1]
    tol = 2 * MATCH_RESIDUAL * float(np.sqrt(np.mean(ref * ref))) + 4e-5
    while j < end and abs(x[j] - y[k + (j - i)]) <= tol:
        j += 1
    return j


def align(got, want, sample_rate: int | None = None, max_spans: int = 24) -> list[Span]:
    """Walk the stream ``got`` against the whole ``want``: equal runs, then at each divergence the place in the
    whole the stream continues from (found by cross-correlation): behind (a replay), ahead (skipped audio) or
    nowhere (other audio)."""
    x, y = flat(got), flat(want)
    w = window_for(sample_rate)
    spans: list[Span] = []
    i = k = 0
    while i < x.size and len(spans) < max_spans:
        j = _run(x, y, i, k, w) if k < y.size else i
        if j > i:
            spans.append(Span("same", i, j, k, k + (j - i)))
            k += j - i
            i = j
            continue
        seg = x[i : i + w]
        found = best_match(seg, y) if seg.size == w and _audible(seg) else None
        if found is None:
            # other audio: up to the next place the stream is heard in the whole again (back to the sample)
            nxt, hit = i + w, None
            while nxt + w <= x.size:
                seg2 = x[nxt : nxt + w]
                hit = best_match(seg2, y) if _audible(seg2) else None
                if hit is not None:
                    break
                nxt += w
            if hit is not None:
                q2 = hit[0]
                tol = 2 * MATCH_RESIDUAL * float(np.sqrt(np.mean(x[nxt : nxt + w] ** 2))) + 4e-5
                while nxt > i + 1 and q2 > 0 and abs(x[nxt - 1] - y[q2 - 1]) <= tol:
                    nxt, q2 = nxt - 1, q2 - 1
            nxt = min(nxt, x.size)
            spans.append(Span("other", i, nxt))
            i = nxt
            continue
        q = found[0]
        if q == k:  # the same audio, but not within the residual sample by sample: step over one window
            spans.append(Span("same", i, i + w, k, k + w))
            i, k = i + w, k + w
        elif q < k:
            # a replay covers what was already streamed (the whole up to k); from there on it is new audio again
            m = min(_run(x, y, i, q, w) - i, k - q)
            spans.append(Span("replay", i, i + m, q, q + m))
            i += m  # the whole's position stays: what follows the replay must continue it
        else:
            spans.append(Span("skip", i, i, k, q))
            k = q
    if i >= x.size and k < y.size:
        spans.append(Span("missing", x.size, x.size, k, y.size))
    return _merge([s for s in spans if s.kind != "same" or s.b > s.a])


def _merge(spans: list[Span]) -> list[Span]:
    """Other audio in place of as much of the whole (the stream's ``a..b`` where the whole has ``c..d``, the same
    length) is one span of different audio, not an insertion and a skip."""
    out: list[Span] = []
    for s in spans:
        prev = out[-1] if out else None
        if prev is not None and prev.kind == "other" and s.kind in ("skip", "missing") and s.d - s.c == prev.b - prev.a:
            out[-1] = Span("differs", prev.a, prev.b, s.c, s.d)
        elif prev is not None and prev.kind == "differs" and s.kind == "differs" and s.a == prev.b and s.c == prev.d:
            out[-1] = Span("differs", prev.a, s.b, prev.c, s.d)
        else:
            out.append(s)
    return out


def describe_spans(spans: list[Span], sample_rate: int | None, sizes=(), what="stream", ref="whole") -> list[str]:
    """One line per span that is not plain agreement."""
    lines = []
    sizes = list(sizes)

    def piece(a: int) -> str:
        j = chunk_of(a, sizes) if sizes else None
        return f" in streamed piece {j}" if j is not None else ""

    for s in spans:
        if s.kind == "replay":
            lines.append(
                f"REPLAY: {what} {span(s.a, s.b, sample_rate)}{piece(s.a)} repeat the {ref}'s "
                f"{span(s.c, s.d, sample_rate)}, already streamed ({s.b - s.a} samples)"
            )
        elif s.kind == "skip":
            lines.append(
                f"SKIPPED: the {ref}'s {span(s.c, s.d, sample_rate)} never streamed (the {what} jumps at "
                f"{at(s.a, sample_rate)}{piece(s.a)})"
            )
        elif s.kind == "other":
            lines.append(f"OTHER AUDIO: {what} {span(s.a, s.b, sample_rate)}{piece(s.a)} are nowhere in the {ref}")
        elif s.kind == "differs":
            lines.append(
                f"DIFFERS: {what} {span(s.a, s.b, sample_rate)}{piece(s.a)} are not the {ref}'s "
                f"{span(s.c, s.d, sample_rate)} (nor anywhere else in it)"
            )
        elif s.kind == "missing":
            lines.append(
                f"TRUNCATED: the {ref}'s {span(s.c, s.d, sample_rate)} never streamed (the {what} ends at "
                f"{at(s.a, sample_rate)})"
            )
    return lines


# ------------------------------------------------------------------------------------------ seams


@dataclass(frozen=True)
class Seam:
    """The boundary before streamed piece ``piece`` at ``sample``: ``energy_db`` is the RMS just around it (2 ms
    either side, less for short pieces) over the RMS further around (up to 16 ms; a dip < 0, a burst > 0), ``jump``
    the step of the waveform over the median step around; ``flagged``: one of them beyond what 99.5% of the positions
    inside the pieces show."""

    piece: int
    sample: int
    energy_db: float
    jump: float
    flagged: bool


@dataclass(frozen=True)
class SeamReport:
    seams: tuple[Seam, ...]  # the seams that could be judged (audible around them)
    energy_limit_db: float  # |energy_db| beyond this is flagged (the interior's 99.5th percentile, >= 3 dB)
    jump_limit: float  # jump beyond this is flagged (the interior's 99.5th percentile, >= 4)
    interior: int  # positions inside the pieces the limits come from

    @property
    def flagged(self) -> tuple[Seam, ...]:
        return tuple(s for s in self.seams if s.flagged)


INTERIOR_QUANTILE = 0.995
MIN_ENERGY_DB, MIN_JUMP = 3.0, 4.0


def _features(x: np.ndarray, pos: np.ndarray, h: int, big: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(energy_db, jump, audible) at each position."""
    sq = np.concatenate([[0.0], np.cumsum(x * x)])
    dx = np.abs(np.diff(x, prepend=x[:1]))
    near = (sq[pos + h] - sq[pos - h]) / (2 * h)
    wide = (sq[pos + big] - sq[pos - big] - (sq[pos + h] - sq[pos - h])) / (2 * (big - h))
    energy = 10 * np.log10((near + 1e-18) / (wide + 1e-18))
    med = np.array([np.median(np.concatenate([dx[p - big : p - h], dx[p + h + 1 : p + big]])) for p in pos])
    jump = dx[pos] / (med + 1e-9)
    audible = np.sqrt(wide) >= SILENCE_RMS
    return energy, jump, audible


def seam_report(samples, sample_rate: int | None, sizes) -> SeamReport:
    """Each seam between streamed pieces against positions inside the pieces (the same stream's own statistics,
    so no threshold depends on the voice or the model)."""
    x = flat(samples)
    sr = sample_rate or 16000
    sizes = [int(s) for s in sizes]
    # the scale: 2 ms around the seam against 16 ms around it, smaller where pieces are short (a piece of 20 ms)
    typical = int(np.median([s for s in sizes if s > 0])) if any(s > 0 for s in sizes) else 0
    h = int(np.clip(typical // 32, 4, sr // 500))
    big = 8 * h
    if sum(sizes) != x.size or x.size < 4 * big:
        return SeamReport((), 0.0, 0.0, 0)
    starts = [int(s) for s, n in zip(chunk_starts(sizes), sizes, strict=True) if n > 0][1:]
    pieces = {int(s): j for j, s in enumerate(chunk_starts(sizes))}
    seams = np.array([s for s in starts if big <= s <= x.size - big], dtype=np.int64)
    keep = np.ones(x.size, dtype=bool)
    keep[: big + 1] = keep[x.size - big - 1 :] = False
    for s in starts:
        keep[max(0, s - big) : s + big] = False
    interior = np.flatnonzero(keep)
    if interior.size > 4000:
        interior = interior[np.linspace(0, interior.size - 1, 4000).astype(np.int64)]
    if not seams.size or interior.size < 50:
        return SeamReport((), 0.0, 0.0, int(interior.size))
    ie, ij, ia = _features(x, interior, h, big)
    e_lim = max(float(np.quantile(np.abs(ie[ia]), INTERIOR_QUANTILE)) if ia.any() else 0.0, MIN_ENERGY_DB)
    j_lim = max(float(np.quantile(ij[ia], INTERIOR_QUANTILE)) if ia.any() else 0.0, MIN_JUMP)
    se, sj, sa = _features(x, seams, h, big)
    out = tuple(
        Seam(pieces.get(int(s), -1), int(s), round(float(e), 2), round(float(j), 2), bool(abs(e) > e_lim or j > j_lim))
        for s, e, j, a in zip(seams, se, sj, sa, strict=True)
        if a
    )
    return SeamReport(out, round(e_lim, 2), round(j_lim, 2), int(interior.size))


# ------------------------------------------------------------------------------------------ attribution


@dataclass(frozen=True)
class Heard:
    """``got`` samples ``a..b`` are ``source``'s samples ``c..`` (correlation ``corr``)."""

    a: int
    b: int
    source: str
    c: int
    corr: float


def attribute(got, sources: dict[str, np.ndarray], sample_rate: int | None, start: int = 0, limit: int = 6):
    """Whose audio ``got`` holds from ``start`` on: each stretch found, window by window, in one of ``sources``
    (label -> audio), grown to its whole length; stretches found nowhere are left out."""
    x = flat(got)
    w = window_for(sample_rate)
    hays = {label: flat(s) for label, s in sources.items()}
    found: list[Heard] = []
    p = start
    while p + w <= x.size and len(found) < limit:
        seg = x[p : p + w]
        if not _audible(seg):
            p += w
            continue
        best = None
        for label, hay in hays.items():
            hit = best_match(seg, hay)
            if hit is not None and (best is None or hit[1] > best[2]):
                best = (label, hit[0], hit[1])
        if best is None:
            p += w
            continue
        label, q, corr = best
        hay, m = hays[label], w
        while p + m + w <= x.size and q + m + w <= hay.size and same(x[p + m : p + m + w], hay[q + m : q + m + w]):
            m += w
        a, c = p, q  # back to where the stretch starts (not before what was found already, nor ``start``)
        floor = max(start, found[-1].b if found else start)
        tol = 2 * MATCH_RESIDUAL * float(np.sqrt(np.mean(seg * seg))) + 4e-5
        while a > floor and c > 0 and abs(x[a - 1] - hay[c - 1]) <= tol:
            a, c = a - 1, c - 1
        while p + m < x.size and q + m < hay.size and abs(x[p + m] - hay[q + m]) <= tol:
            m += 1
        found.append(Heard(a, p + m, label, c, round(corr, 5)))
        p += m
    return found


def describe_heard(heard: list[Heard], sample_rate: int | None, own: str) -> list[str]:
    lines = []
    for h in heard:
        whose = "its own solo audio" if h.source == own else h.source
        shift = "" if h.source != own or h.a == h.c else f", shifted by {h.a - h.c} samples"
        lines.append(
            f"{span(h.a, h.b, sample_rate)} are {whose}'s {span(h.c, h.c + (h.b - h.a), sample_rate)}"
            f" (correlation {h.corr:.4f}{shift})"
        )
    return lines


# ------------------------------------------------------------------------------------------ gates


def nonfinite(samples) -> tuple[int, int] | None:
    """(count, first index) of NaN/Inf samples, or None."""
    x = np.asarray(samples).reshape(-1)
    bad = np.flatnonzero(~np.isfinite(x))
    return (int(bad.size), int(bad[0])) if bad.size else None


def gate_stats(samples, sample_rate: int | None, chars: int | None = None) -> dict:
    """Silence ratio (20 ms frames under -60 dBFS), clipping ratio (|x| >= 0.999), DC offset, peak, RMS, duration
    and seconds per input character."""
    x = flat(samples)
    sr = sample_rate or 16000
    frame = max(1, sr // 50)
    n = x.size // frame
    if n:
        rms = np.sqrt((x[: n * frame].reshape(n, frame) ** 2).mean(axis=1))
        silence = float((rms < SILENCE_RMS).mean())
    else:  # shorter than one frame: the whole clip is the frame (a loud 10 ms clip is short, not silent)
        silence = float(np.sqrt((x * x).mean()) < SILENCE_RMS) if x.size else 1.0
    duration = x.size / sr
    return {
        "samples": int(x.size),
        "duration_s": round(duration, 4),
        "silence_ratio": round(silence, 4),
        "clipping_ratio": round(float((np.abs(x) >= CLIP_LEVEL).mean()) if x.size else 0.0, 4),
        "dc_offset": round(float(x.mean()) if x.size else 0.0, 4),
        "peak": round(float(np.abs(x).max()) if x.size else 0.0, 4),
        "rms": round(float(np.sqrt((x * x).mean())) if x.size else 0.0, 4),
        "std": round(float(x.std()) if x.size else 0.0, 6),
        "seconds_per_char": round(duration / chars, 5) if chars else None,
    }
