"""Async chunk (the guide's Phase 4): chunked decoding with left context equals full decoding at every boundary."""

from __future__ import annotations

import numpy as np

from omnitts.validators import checkids
from omnitts.validators.observations.audio import ChunkObservation
from omnitts.validators.verdicts.base import Finding, Verdict, Wav, not_applicable, outcome, verdict
from omnitts.validators.verdicts.compare import compare
from omnitts.validators.verdicts.tolerances import Tolerance, tolerance


def boundary_errors(chunked: list[np.ndarray], full: np.ndarray, tol: Tolerance) -> list[str]:
    """Each chunk that differs from the full decode: its first bad sample, counted from the boundary."""
    out, pos = [], 0
    for j, d in enumerate(chunked):
        seg = full[pos : pos + d.size]
        n = min(seg.size, d.size)
        diff = np.abs(d[:n] - seg[:n])
        bad = np.flatnonzero(diff > tol.atol + tol.rtol * np.abs(seg[:n]))
        if seg.size != d.size or bad.size:
            first = int(bad[0]) if bad.size else n
            out.append(
                f"chunk {j} (starts at sample {pos}): max |diff| {float(diff.max()) if n else float('nan'):.3g}, "
                f"first bad sample {pos + first} ({first} after the boundary)"
            )
        pos += d.size
    return out


@verdict(checkids.CHUNK_BOUNDARIES)
def chunk_boundaries(obs: ChunkObservation) -> Verdict:
    check = checkids.CHUNK_BOUNDARIES
    if obs.unavailable:
        return not_applicable(check, obs.unavailable)
    tol = tolerance(obs.source, "chunk")
    findings, boundaries = [], 0
    for pair in obs.pairs:
        got, full, name = pair.chunked, pair.full, pair.chunked.request
        boundaries += max(len(got.deltas) - 1, 0)
        cmp = compare(
            got.samples, full.samples, tol.rtol, tol.atol, got.pieces(), f"chunked ({pair.config})", "full decode"
        )
        if not cmp:
            errs = boundary_errors(got.pieces(), full.samples, tol)
            folder = f"chunk_{pair.config}"
            listen = (
                Wav(folder, name, got.samples, got.sample_rate),
                Wav(folder, f"{name}_full", full.samples, full.sample_rate),
            )
            findings.append(
                Finding(f"[{pair.config}] {name}: {cmp.verdict}\n      " + "\n      ".join(errs[:4]), listen)
            )
    return outcome(
        check,
        f"Async chunk: chunked decoding differs from full decoding ({tol}):",
        findings,
        f"{boundaries} chunk boundaries decode as the full decode does",
        metrics={**(obs.about or {}), "boundaries": boundaries, "rtol": tol.rtol, "atol": tol.atol},
        shown=6,
    )
