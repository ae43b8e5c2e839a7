"""I3, hot-loop GPU discipline: host syncs per steady-state step, graph breaks of the compiled AR step."""

from __future__ import annotations

from omnitts.validators import checkids
from omnitts.validators.observations.model import GraphBreaksObservation
from omnitts.validators.observations.state import HostSyncObservation
from omnitts.validators.verdicts.base import Verdict, failed, not_applicable, outcome, passed, verdict

KINDS = ("dispatch spy", "set_sync_debug_mode")


@verdict(checkids.I3_HOST_SYNCS)
def host_syncs(obs: HostSyncObservation) -> Verdict:
    """No more host syncs in a steady-state step (every scheduled request decoding) than the model's budget per
    request; the spy (dispatch spy + tensor method wrappers on CPU, ``torch.cuda.set_sync_debug_mode`` on CUDA) is
    armed after warm-up."""
    check, budget = checkids.I3_HOST_SYNCS, obs.budget_per_request_step
    errors = [r.error for r in obs.reports if r.error]
    if errors:
        return failed(check, f"I3: {errors[0]}", ())
    problems, sites, suppressed = [], {}, set()
    steady_sites: dict[str, int] = {}  # every steady-step event, in budget or not: no count without its line
    owners: dict[str, dict[str, int]] = {kind: {} for kind in KINDS}
    steady_steps = in_steady = outside = debug = debug_suppressed = worst = suppressed_syncs = 0
    for rep in obs.reports:
        steady = rep.steady
        steady_steps += len(steady)
        in_steady += sum(1 for e in rep.events if e.label in steady and e.suppressed is None)
        outside += sum(1 for e in rep.events if e.label not in steady)
        debug += sum(1 for e in rep.debug_events if e.label in steady)
        debug_suppressed += sum(1 for e in rep.debug_events if e.label in steady and e.suppressed)
        suppressed_syncs += sum(1 for e in rep.events if e.suppressed and e.label in steady)
        worst = max([worst, *(n for lab, n in rep.steps.items() if lab in steady)])
        for kind, steps, events in ((KINDS[0], rep.steps, rep.events), (KINDS[1], rep.debug_steps, rep.debug_events)):
            over = {lab: n for lab, n in steps.items() if lab in steady and n > budget * steady[lab]}
            for e in events:
                if e.label in steady:
                    key = f"[{kind}; {e.owner}] {e.op} at {e.where}"
                    steady_sites[key] = steady_sites.get(key, 0) + 1
                    owners[kind][e.owner] = owners[kind].get(e.owner, 0) + 1
                if e.suppressed:
                    suppressed.add(f"{e.op} at {e.where} — {e.suppressed}")
                elif e.label in over:
                    key = f"{e.op} at {e.where}"
                    sites[key] = sites.get(key, 0) + 1
            if over:
                problems.append(
                    f"{kind}: {sum(over.values())} host syncs in {len(over)} of {len(steady)} steady-state steps"
                )
    ranked = sorted(sites.items(), key=lambda kv: -kv[1])
    device = obs.reports[0].device if obs.reports else None
    metrics = {
        "steady_steps": steady_steps,
        "syncs_in_steady_steps": in_steady,
        "cuda_sync_debug_events": debug,
        "cuda_sync_debug_suppressed": debug_suppressed,
        "max_syncs_per_steady_step": worst,
        "budget_per_request_step": budget,
        "syncs_outside_steady_state": outside,
        "device": device,
        "sites": [site for site, _ in ranked[:10]],
        "suppressed_sites": sorted(suppressed)[:10],
        "suppressed_syncs": suppressed_syncs,
        # every steady-step event by site and owner (model line, suppressed model line, harness, other code)
        "steady_sites": [f"{n}x {site}" for site, n in sorted(steady_sites.items(), key=lambda kv: -kv[1])[:10]],
        "steady_syncs_by_owner": {kind: counts for kind, counts in owners.items() if counts},
    }
    unknown = sum(counts.get("unknown", 0) for counts in owners.values())
    if unknown:  # fail closed: a sync the spy saw but could place on no line is not a pass
        return failed(
            check,
            f"I3: {unknown} host syncs in steady-state steps could be attributed to no source line",
            (),
            metrics=metrics,
        )
    if obs.failures:
        return failed(check, "I3: the requests of the sync count failed:", obs.failures, metrics=metrics)
    if not steady_steps:
        return failed(check, "I3: the run had no steady-state (all-decode) step to measure", (), metrics=metrics)
    head = f"I3: {'; '.join(problems)} (budget {budget} per request and step; device {device}). Lines that synced:"
    lines = [f"{n}x {site}" for site, n in ranked[:6]]
    return outcome(
        check,
        head,
        lines if problems else (),
        f"no host sync over budget in {steady_steps} steady steps",
        metrics=metrics,
    )


@verdict(checkids.I3_GRAPH_BREAKS)
def graph_breaks(obs: GraphBreaksObservation) -> Verdict:
    """torch._dynamo.explain on one steady-state AR step: graph and graph-break counts are reported."""
    check = checkids.I3_GRAPH_BREAKS
    if obs.error:
        return not_applicable(check, f"torch._dynamo.explain could not trace the AR step: {obs.error}")
    if not obs.found:
        return not_applicable(check, "no steady-state AR step reached")
    return passed(check, f"graph breaks: {obs.found}", metrics={"graph_breaks": obs.found})
