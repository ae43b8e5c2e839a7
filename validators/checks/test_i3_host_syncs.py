"""I3 — hot-loop GPU discipline: host syncs per steady-state step, graph breaks of the compiled AR step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from omnitts.validators import checkids
from omnitts.validators.runtime.context import raise_failure
from omnitts.validators.runtime.harness import PASS, StopRun
from omnitts.validators.runtime.scenarios import compositions
from omnitts.validators.runtime.syncspy import SyncSpy, graph_breaks
from omnitts.validators.runtime.timeouts import CheckTimeout, deadline

pytestmark = pytest.mark.usefixtures("omnitts_model")


@pytest.mark.omnitts_check(checkids.I3_HOST_SYNCS)
def test_i3_host_syncs(ctx, record):
    """No host sync in any steady-state step (budget 0), on CPU via dispatch spy + method wrappers, on CUDA also
    via torch.cuda.set_sync_debug_mode armed after warm-up."""
    sub = ctx.subject
    plans, kw = compositions(sub)["all_at_once"]
    # 4 concurrent requests, 10 steps each: enough steady-state steps; the spy makes every op a Python call
    plans = [replace(p, max_tokens=min(p.max_tokens, 10)) for p in plans[:4]]
    spy = SyncSpy(sub.model_files, device=ctx.options.device)  # one-time torch._dynamo import, outside the deadline
    with ctx.guard("I3 sync count"):
        if ctx.options.device == "cuda":
            ctx.engine(**kw).run(plans, "i3-warmup")  # warm-up (and any graph capture) before arming
        eng = ctx.engine(spy=spy, **kw)
        eng.spy_active = True
        run = eng.run(plans, "i3-syncs")
    steady = {f"stage{s.stage} step {s.step}": len(s.req_ids) for s in run.steps if s.steady}
    budget_per_req = sub.sync_budget_per_request_step
    rep = spy.report
    problems, sites = [], {}
    for name, steps, events in (
        ("dispatch spy", rep.steps, rep.events),
        ("set_sync_debug_mode", rep.debug_steps, rep.debug_events),
    ):
        over = {lab: n for lab, n in steps.items() if lab in steady and n > budget_per_req * steady[lab]}
        for e in events:
            if e.label in over and e.suppressed is None:
                key = f"{e.op} at {e.where}"
                sites[key] = sites.get(key, 0) + 1
        if over:
            total = sum(over.values())
            problems.append(f"{name}: {total} host syncs in {len(over)} of {len(steady)} steady-state steps")
    steady_events = [e for e in rep.events if e.label in steady and e.suppressed is None]
    suppressed = sorted({f"{e.op} at {e.where} — {e.suppressed}" for e in rep.events if e.suppressed})
    record(
        steady_steps=len(steady),
        syncs_in_steady_steps=len(steady_events),
        cuda_sync_debug_events=len([e for e in rep.debug_events if e.label in steady]),
        max_syncs_per_steady_step=max((n for lab, n in rep.steps.items() if lab in steady), default=0),
        budget_per_request_step=budget_per_req,
        syncs_outside_steady_state=len([e for e in rep.events if e.label not in steady]),
        device=ctx.options.device,
        sites=sorted(sites, key=lambda k: -sites[k])[:10],
        suppressed_sites=suppressed[:10],
        suppressed_syncs=sum(1 for e in rep.events if e.suppressed and e.label in steady),
    )
    if not steady:
        pytest.fail("I3: the run had no steady-state (all-decode) step to measure", pytrace=False)
    if problems:
        worst = sorted(sites.items(), key=lambda kv: -kv[1])[:6]
        lines = [f"{n}x {site}" for site, n in worst]
        pytest.fail(
            f"I3: {'; '.join(problems)} (budget {budget_per_req} per request and step; device "
            f"{ctx.options.device}). Lines that synced:\n  " + "\n  ".join(lines),
            pytrace=False,
        )


@pytest.mark.omnitts_check(checkids.I3_GRAPH_BREAKS)
def test_i3_graph_breaks(ctx, record):
    """torch._dynamo.explain on one steady-state AR step: graph and graph-break counts are reported."""
    sub = ctx.subject
    plans = [replace(sub.prompts[0], arrive_step=0, abort_step=None)]  # one request: a smaller graph to trace
    kw: dict = {}
    found: dict = {}

    def intercept(stage, method, fn, args, kwargs):
        if stage != 0 or method != "__call__":
            return PASS
        decoding = kwargs["input_ids"].shape[0] == len(kwargs.get("runtime_additional_information") or [1])
        if not decoding or eng.step_index < 2:
            return PASS
        found.update(graph_breaks(fn, *args, **kwargs))
        raise StopRun()

    import torch._dynamo  # noqa: F401  (seconds of import time, outside the deadline)

    eng = ctx.engine(**kw)
    eng.intercept = intercept
    try:
        with deadline(max(ctx.options.timeout, 120), f"{sub.name}: dynamo explain"):
            eng.run(plans, "i3-explain")
    except StopRun:
        pass
    except CheckTimeout as exc:
        ctx.hung = ctx.hung or "dynamo explain of the AR step"
        raise_failure(exc, "I3 graph-break count")
    except Exception as exc:  # noqa: BLE001 - tracing failures are reported, not fatal
        found.setdefault("error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    finally:
        torch._dynamo.reset()
    if not found:
        pytest.skip("no steady-state AR step reached")
    record(graph_breaks=found)
    if "error" in found:
        pytest.skip(f"torch._dynamo.explain could not trace the AR step: {found['error']}")
