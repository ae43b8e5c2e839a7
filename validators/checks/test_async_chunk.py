"""Phase 4 — async chunk: chunked decoding with left context equals full decoding at every boundary."""

from __future__ import annotations

import pytest
import torch

from omnitts.validators import checkids
from omnitts.validators.runtime.diagnose import compare
from omnitts.validators.runtime.scenarios import compositions

pytestmark = pytest.mark.usefixtures("omnitts_model")


def _boundary_errors(chunked: list[torch.Tensor], full: torch.Tensor, tol: dict) -> list[str]:
    out, pos = [], 0
    full = full.reshape(-1)
    for j, d in enumerate(chunked):
        d = d.reshape(-1).float()
        seg = full[pos : pos + d.numel()]
        if seg.numel() != d.numel() or not torch.allclose(d, seg, **tol):
            n = min(seg.numel(), d.numel())
            diff = (d[:n] - seg[:n]).abs()
            bad = (diff > tol["atol"] + tol["rtol"] * seg[:n].abs()).nonzero()
            first = int(bad[0, 0]) if bad.numel() else n
            out.append(
                f"chunk {j} (starts at sample {pos}): max |diff| {float(diff.max()) if n else float('nan'):.3g}, "
                f"first bad sample {pos + first} ({first} after the boundary)"
            )
        pos += d.numel()
    return out


@pytest.mark.omnitts_check(checkids.CHUNK_BOUNDARIES)
def test_async_chunk_equals_full_decode(ctx, record):
    sub = ctx.subject
    if not sub.two_stage:
        pytest.skip(f"{sub.pattern}: single-stage patterns skip Phase 4 (async_chunk)")
    tol = ctx.tolerance(chunk=True)
    plans, _ = compositions(sub)["all_at_once"]
    full = ctx.run(
        "chunk:full",
        plans,
        connector_extra={"codec_chunk_frames": 10**6, "codec_left_context_frames": 0, "initial_codec_chunk_frames": 0},
    )
    base = dict(sub.connector_extra)
    left = int(base.get("codec_left_context_frames", 0) or 0)
    configs = {"deploy": None, "small_chunks": {"codec_chunk_frames": 3, "codec_left_context_frames": max(left, 1)}}
    problems, boundaries = [], {}
    for cname, extra in configs.items():
        run = (
            ctx.composition("all_at_once") if extra is None else ctx.run(f"chunk:{cname}", plans, connector_extra=extra)
        )
        for ext, res in run.requests.items():
            ref = full.requests[ext].stream_audio
            boundaries[f"{cname}:{ext}"] = max(len(res.deltas) - 1, 0)
            cmp = compare(res.stream_audio, ref, deltas=res.deltas, what=f"chunked ({cname})", ref="full decode", **tol)
            if not cmp:
                errs = _boundary_errors(res.deltas, ref, tol)
                p = ctx.write_audio(f"chunk_{cname}", ext, res.stream_audio, res.sample_rate)
                pf = ctx.write_audio(f"chunk_{cname}", f"{ext}_full", ref, res.sample_rate)
                problems.append(
                    f"[{cname}] {ext}: {cmp.verdict}\n      "
                    + "\n      ".join(errs[:4])
                    + f"\n      listen: {p} vs {pf}"
                )
    record(boundaries=sum(boundaries.values()), rtol=tol["rtol"], atol=tol["atol"], connector=base)
    if problems:
        pytest.fail(
            f"Async chunk: chunked decoding differs from full decoding (rtol={tol['rtol']:g}, "
            f"atol={tol['atol']:g}):\n  " + "\n  ".join(problems[:6]),
            pytrace=False,
        )
