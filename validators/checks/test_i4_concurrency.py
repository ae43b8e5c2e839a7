"""I4 — concurrent requests: each request's audio equals its solo run in several batch compositions."""

from __future__ import annotations

import pytest

from omnitts.validators import checkids
from omnitts.validators.runtime.diagnose import compare, crosstalk
from omnitts.validators.runtime.scenarios import compositions

pytestmark = pytest.mark.usefixtures("omnitts_model")


@pytest.mark.omnitts_check(checkids.I4_CONCURRENCY)
def test_i4_concurrent_equals_solo(ctx, record):
    sub = ctx.subject
    if len(sub.prompts) < 4:
        pytest.fail(
            f"I4: {sub.name} has {len(sub.prompts)} prompts; the concurrency check needs at least 4", pytrace=False
        )
    solo = ctx.solo_audio()
    tol = ctx.tolerance()
    problems, summary = [], {}
    for name in compositions(sub):
        run = ctx.composition(name)
        widest = max((len(s.req_ids) for s in run.steps if s.stage == 0), default=0)
        exact = 0
        checked = 0
        for ext, res in run.requests.items():
            if res.aborted or ext not in solo:
                continue
            checked += 1
            cmp = compare(
                res.stream_audio, solo[ext], deltas=res.deltas, what=f"{ext} in {name}", ref="its solo run", **tol
            )
            exact += int(cmp.exact)
            if not cmp:
                who = crosstalk(res.stream_audio, solo[ext], solo, ext, res.deltas, tol["rtol"], tol["atol"])
                p = ctx.write_audio(f"i4_{name}", ext, res.stream_audio, res.sample_rate)
                ps = ctx.write_audio(f"i4_{name}", f"{ext}_solo", solo[ext], sub.sample_rate)
                problems.append(f"[{name}] {cmp.verdict}\n      crosstalk: {who}\n      listen: {p} vs {ps}")
        summary[name] = {"requests": checked, "bit_exact": exact, "widest_stage0_batch": widest}
        if name == "all_at_once" and widest < 4:
            problems.append(f"[{name}] only {widest} requests ever shared a stage-0 batch; need >= 4 concurrent")
    record(compositions=summary, rtol=tol["rtol"], atol=tol["atol"])
    if problems:
        pytest.fail(
            f"I4: concurrent audio differs from solo audio (rtol={tol['rtol']:g}, atol={tol['atol']:g}):\n  "
            + "\n  ".join(problems[:8]),
            pytrace=False,
        )
