"""Offline RTF and time to first audio per request (reported; fails only on missing audio)."""

from __future__ import annotations

import math

import pytest

from omnitts.validators import checkids

pytestmark = pytest.mark.usefixtures("omnitts_model")


@pytest.mark.omnitts_check(checkids.PERF_RTF_TTFA)
def test_rtf_and_time_to_first_audio(ctx, record):
    sub = ctx.subject
    out, problems = {}, []
    runs = {"solo": None, "all_at_once": None}
    runs["all_at_once"] = ctx.composition("all_at_once")
    solo = ctx.solo_runs()
    for name in runs:
        items = [(e, solo[e].requests[e]) for e in solo] if name == "solo" else list(runs[name].requests.items())
        rows = {}
        for ext, res in items:
            dur = res.stream_audio.numel() / (res.sample_rate or sub.sample_rate)
            if dur <= 0 or res.t_first_audio is None:
                problems.append(f"{name}/{ext}: no audio")
                continue
            rows[ext] = {
                "audio_s": round(dur, 4),
                "rtf": round((res.t_finish - res.t_arrive) / dur, 4),
                "ttfa_ms": round((res.t_first_audio - res.t_arrive) * 1e3, 3),
            }
        out[name] = rows
    rtfs = [r["rtf"] for rows in out.values() for r in rows.values()]
    ttfa = [r["ttfa_ms"] for rows in out.values() for r in rows.values()]
    record(
        per_request=out,
        device=ctx.options.device,
        rtf_mean=round(sum(rtfs) / len(rtfs), 4) if rtfs else math.nan,
        rtf_max=max(rtfs, default=math.nan),
        ttfa_ms_max=max(ttfa, default=math.nan),
    )
    if problems:
        pytest.fail("no audio to time: " + "; ".join(problems), pytrace=False)
