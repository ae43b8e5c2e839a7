"""The I3 verdict names every steady-step sync with its line and owner, in budget or not.

What the H200 showed for ref_single_stage (25 ``set_sync_debug_mode`` events in 9 steady steps, no line named): the
model's one budgeted, suppressed stop-flag read per request and step (``stopped.tolist()``), counted among the debug
events but listed nowhere, because only over-budget steps' sites were listed. The same 25 reads on CPU:
``python benchmarks/sync_sites.py --models ref_single_stage`` (benchmarks/results/gpu-real-size-0.30.0).
"""

from __future__ import annotations

from omnitts.validators.observations.state import HARNESS, HostSyncObservation, SyncEvent, SyncReport
from omnitts.validators.verdicts.i3 import host_syncs

LINE = "modeling_ref_single_stage.py:320 in generate_chunk: flags = stopped.tolist()"
SYNC = "cuda sync (set_sync_debug_mode)"


def _report(debug_events, steady=None, debug_steps=None) -> HostSyncObservation:
    steady = steady or {f"stage0 step {i}": 4 for i in range(9)}
    rep = SyncReport(steady, dict.fromkeys(steady, 0), (), debug_steps or {}, tuple(debug_events), "cuda")
    return HostSyncObservation((rep,), budget_per_request_step=1)


def test_budgeted_suppressed_reads_are_counted_and_named():
    events = [SyncEvent(SYNC, LINE, f"stage0 step {i % 9}", "[OMNI-I3-002] the one read per chunk") for i in range(25)]
    verdict = host_syncs(_report(events))
    assert verdict.passed
    m = verdict.metrics
    assert m["cuda_sync_debug_events"] == 25 and m["cuda_sync_debug_suppressed"] == 25
    assert m["steady_sites"] == [f"25x [set_sync_debug_mode; model, suppressed] {SYNC} at {LINE}"]
    assert m["steady_syncs_by_owner"] == {"set_sync_debug_mode": {"model, suppressed": 25}}


def test_a_harness_sync_is_named_as_the_harness():
    where = f"{HARNESS}validators/runtime/harness/stages.py:80 in _call: return fn(*args, **kwargs)"
    events = [SyncEvent(SYNC, where, "stage0 step 0")]
    verdict = host_syncs(_report(events, debug_steps={"stage0 step 0": 1}))
    assert verdict.passed  # one sync in a step of 4 requests: within a budget of 1 per request
    assert verdict.metrics["steady_syncs_by_owner"] == {"set_sync_debug_mode": {"harness": 1}}
    assert verdict.metrics["steady_sites"][0].startswith("1x [set_sync_debug_mode; harness]")


def test_a_sync_on_no_line_fails_closed():
    verdict = host_syncs(_report([SyncEvent(SYNC, "<unknown>", "stage0 step 2")], debug_steps={"stage0 step 2": 1}))
    assert not verdict.passed
    assert "attributed to no source line" in verdict.headline


def test_over_budget_model_syncs_still_fail_with_their_line():
    steady = {"stage0 step 0": 1}
    events = [SyncEvent(SYNC, "model.py:7 in forward: x.item()", "stage0 step 0")] * 2
    verdict = host_syncs(_report(events, steady=steady, debug_steps={"stage0 step 0": 2}))
    assert not verdict.passed
    assert any("model.py:7" in line for line in (f.text for f in verdict.findings))
