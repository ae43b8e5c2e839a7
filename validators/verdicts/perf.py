"""Real-time factor, time to first audio and (streamed over HTTP) underrun: measured and reported; only missing audio
fails. TTFP, RTF and underrun follow ``vllm bench serve --omni`` (docs/probe.md)."""

from __future__ import annotations

import math
import statistics

from omnitts.validators import checkids
from omnitts.validators.observations.audio import PerfObservation
from omnitts.validators.verdicts.base import Verdict, outcome, verdict

UNDERRUN_BUDGET_S = 0.1  # vllm bench's default audible-gap budget (AUDIO_CONTINUITY_DEFAULT_THRESHOLD_S)


def underrun(arrivals: list[float], sizes: list[int], per_s: float) -> tuple[float, int]:
    """Worst playback deficit (s) and deficit count of a stream, as vllm bench's audio continuity defines them:
    playback starts when the first chunk arrives and consumes ``per_s``; at each later chunk's arrival the deficit is
    what playback would have consumed minus what had arrived before that chunk."""
    if not arrivals or per_s <= 0:
        return 0.0, 0
    worst, count, received = 0.0, 0, 0
    for i, (at, size) in enumerate(zip(arrivals, sizes, strict=True)):
        if i:
            deficit = ((at - arrivals[0]) * per_s - received) / per_s
            if deficit > 0:
                worst, count = max(worst, deficit), count + 1
        received += size
    return worst, count


def stats(values: list[float], digits: int = 4) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {
        "mean": round(statistics.fmean(values), digits),
        "median": round(statistics.median(values), digits),
        "p99": round(p99, digits),
        "max": round(ordered[-1], digits),
    }


@verdict(checkids.PERF_RTF_TTFA)
def rtf_ttfa(obs: PerfObservation) -> Verdict:
    findings, rounds = [], {}
    for rnd in obs.rounds:
        rows = {}
        for t in rnd.timings:
            if t.error:
                findings.append(f"{rnd.name}/{t.request}: {t.error}")
                continue
            if t.audio_s <= 0 or not t.arrivals or t.latency_s is None:
                findings.append(f"{rnd.name}/{t.request}: no audio")
                continue
            row = {
                "audio_s": round(t.audio_s, 4),
                "rtf": round(t.latency_s / t.audio_s, 4),
                "ttfa_ms": round(t.arrivals[0] * 1e3, 3),
                "chunks": len(t.arrivals),
            }
            if rnd.units_per_s:
                worst, events = underrun(list(t.arrivals), list(t.sizes), rnd.units_per_s)
                row.update(underrun_s=round(worst, 4), underrun_events=events)
            rows[t.request] = row
        summary = {
            "rtf": stats([r["rtf"] for r in rows.values()]),
            "ttfa_ms": stats([r["ttfa_ms"] for r in rows.values()], 2),
        }
        if rnd.units_per_s:
            summary["underrun_s"] = stats([r["underrun_s"] for r in rows.values()])
            summary["continuous"] = sum(r["underrun_s"] <= UNDERRUN_BUDGET_S for r in rows.values())
        rounds[rnd.name] = {"requests": rows, **summary}
    rtfs = [r["rtf"] for rnd in rounds.values() for r in rnd["requests"].values()]
    ttfa = [r["ttfa_ms"] for rnd in rounds.values() for r in rnd["requests"].values()]
    metrics = {
        "rounds": rounds,
        "device": obs.source.device,
        "stream": obs.stream,
        "rtf_mean": round(sum(rtfs) / len(rtfs), 4) if rtfs else math.nan,
        "rtf_max": max(rtfs, default=math.nan),
        "ttfa_ms_max": max(ttfa, default=math.nan),
    }
    summary = ", ".join(
        f"{name}: TTFA median {r['ttfa_ms'].get('median')} ms, RTF median {r['rtf'].get('median')}"
        for name, r in rounds.items()
    )
    return outcome(
        checkids.PERF_RTF_TTFA,
        "no audio to time:",
        findings,
        f"measured (reported, no threshold): {summary}",
        metrics=metrics,
    )
