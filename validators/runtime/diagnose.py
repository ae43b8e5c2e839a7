"""Name what went wrong when two waveforms differ: replay, truncation, crosstalk, boundary glitches."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
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


def _flat(x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu").float().reshape(-1)
    return torch.as_tensor(x, dtype=torch.float32).reshape(-1)


def first_divergence(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> int | None:
    n = min(a.numel(), b.numel())
    if n:
        bad = ~torch.isclose(a[:n], b[:n], rtol=rtol, atol=atol)
        if bool(bad.any()):
            return int(bad.nonzero()[0, 0])
    if a.numel() != b.numel():
        return n
    return None


def find_segment(
    seg: torch.Tensor, hay: torch.Tensor, rtol: float, atol: float, exclude: int | None = None
) -> int | None:
    """Offset of ``seg`` inside ``hay`` (within tolerance), preferring offsets != ``exclude``."""
    w = seg.numel()
    if w == 0 or hay.numel() < w:
        return None
    windows = hay.unfold(0, w, 1)
    tol = atol + rtol * seg.abs()
    ok = ((windows - seg).abs() <= tol).all(dim=1).nonzero().reshape(-1).tolist()
    if not ok:
        return None
    others = [o for o in ok if o != exclude]
    return (others or ok)[0]


def step_of(sample: int, deltas: list[torch.Tensor]) -> int | None:
    pos = 0
    for j, d in enumerate(deltas):
        pos += d.numel()
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
    n = min(a.numel(), b.numel())
    max_abs = float((a[:n] - b[:n]).abs().max()) if n else 0.0
    exact = a.numel() == b.numel() and bool(torch.equal(a, b))
    p = first_divergence(a, b, rtol, atol)
    if p is None:
        return Comparison(
            True,
            exact,
            max_abs,
            None,
            a.numel(),
            b.numel(),
            f"{what} equals {ref}"
            + (" bit-exactly" if exact else f" within rtol={rtol:g}, atol={atol:g} (max |diff| {max_abs:.3g})"),
        )
    where = ""
    if deltas:
        j = step_of(p, [d.reshape(-1) for d in deltas])
        if j is not None:
            where = f" (step {j} of {len(deltas)})"
    w = max(1, min(64, a.numel() - p, b.numel()))
    verdict = ""
    if a.numel() > b.numel():
        seg = a[p : p + w]
        q = find_segment(seg, b, rtol, atol, exclude=p)
        if q is not None and q < p:
            verdict = (
                f"REPLAY: {what} has {a.numel()} samples, {ref} {b.numel()}; from sample {p}{where} it re-emits {ref}"
                f" samples from {q} on (already streamed) - cumulative output where delta is expected"
            )
        else:
            verdict = (
                f"EXTRA AUDIO: {what} has {a.numel() - b.numel()} samples more than {ref}; "
                f"first difference at sample {p}{where}"
            )
    elif a.numel() < b.numel():
        seg = a[p : p + w]
        q = find_segment(seg, b, rtol, atol, exclude=p) if seg.numel() else None
        if p >= a.numel():
            verdict = (
                f"TRUNCATION: {what} stops at sample {a.numel()}{where}; {ref} has {b.numel()} "
                f"({b.numel() - a.numel()} missing at the end)"
            )
        elif q is not None and q > p:
            verdict = (
                f"TRUNCATION: {ref} samples {p}..{q} are missing from {what} at sample {p}{where} "
                "(audio skipped: state reset or codes not accumulated)"
            )
        else:
            verdict = (
                f"TRUNCATION: {what} has {a.numel()} samples, {ref} {b.numel()}; first difference at sample {p}{where}"
            )
    else:
        verdict = (
            f"MISMATCH: same length ({a.numel()}), first difference at sample {p}{where}, "
            f"max |diff| {max_abs:.3g} (rtol={rtol:g}, atol={atol:g})"
        )
    return Comparison(False, False, max_abs, p, a.numel(), b.numel(), verdict)


def detect_replay(deltas: list[torch.Tensor], rtol: float = 1e-4, atol: float = 1e-5) -> str | None:
    """Cumulative output: each delta starts with (or is) the previous one, or with what was already streamed."""
    ds = [_flat(d) for d in deltas if d.numel()]
    if len(ds) < 3:
        return None
    hits = 0
    for prev, cur in zip(ds, ds[1:], strict=False):
        if cur.numel() > prev.numel() and torch.allclose(cur[: prev.numel()], prev, rtol=rtol, atol=atol):
            hits += 1
    if hits >= max(2, (len(ds) - 1) * 3 // 4):
        return (
            f"REPLAY: {hits} of {len(ds) - 1} deltas start with the previous delta (cumulative re-decoding from step 0)"
        )
    return None


def crosstalk(
    got, own_solo, solos: dict[str, torch.Tensor], me: str, deltas: list | None, rtol: float, atol: float
) -> str:
    """Which request's audio ``me`` received, chunk by chunk, when it differs from its solo run."""
    a, own = _flat(got), _flat(own_solo)
    chunks = [_flat(d) for d in deltas] if deltas else [a]
    pos = 0
    notes = []
    for j, c in enumerate(chunks):
        n = c.numel()
        if n == 0:
            continue
        ref = own[pos : pos + n]
        if ref.numel() == n and torch.allclose(c, ref, rtol=rtol, atol=atol):
            pos += n
            continue
        source = None
        for other, s in solos.items():
            if other == me:
                continue
            sf = _flat(s)
            seg = sf[pos : pos + n]
            if seg.numel() == n and torch.allclose(c, seg, rtol=rtol, atol=atol):
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
    if not notes:
        return "no chunk differs (length mismatch only)"
    return "; ".join(notes)
