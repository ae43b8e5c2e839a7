"""I5 — per-request state is owned by the request: gone after finish and abort, no growth over 100 requests."""

from __future__ import annotations

import pytest

from omnitts.validators import checkids
from omnitts.validators.runtime import state
from omnitts.validators.runtime.scenarios import short_plans

pytestmark = pytest.mark.usefixtures("omnitts_model")


def _ids(run) -> dict[str, str]:
    ids = {}
    for ext, res in run.requests.items():
        ids[ext] = f"global_request_id of {ext}"
        for stage, rid in res.stage_ids.items():
            ids[rid] = f"stage-{stage} scheduler id of {ext}"
    return ids


@pytest.mark.omnitts_check(checkids.I5_STATE_FREED)
def test_i5_state_freed_after_finish_and_abort(ctx, record):
    problems = []
    for name in ("all_at_once", "with_abort"):
        run = ctx.composition(name)  # shared with I4; run.models are the stage models after the run drained
        left = state.holders(run.models, _ids(run))
        aborted = [e for e, r in run.requests.items() if r.aborted]
        for line in left:
            when = "abort" if any(a in line for a in aborted) else "finish"
            problems.append(f"after {when} ({name}): {line}")
    notified = ctx.profile
    record(
        finish_hook_ar=notified.ar_notifies_finish,
        finish_hook_generation=notified.generation_notifies_finish,
        id_key=notified.preprocess_id_key,
    )
    if problems:
        pytest.fail(
            f"I5: per-request entries survive the request (vLLM-Omni {notified.version} passes scheduler ids "
            f"to on_requests_finished; key state by {notified.preprocess_id_key or 'the runner buffer'}):\n  "
            + "\n  ".join(problems[:10]),
            pytrace=False,
        )


@pytest.mark.omnitts_check(checkids.I5_NO_GROWTH)
def test_i5_no_growth_over_100_requests(ctx, record):
    sub = ctx.subject
    plans = short_plans(sub, 100, max_tokens=3)
    with ctx.guard("I5 100 sequential requests", max(ctx.options.timeout, 120)):
        eng = ctx.engine()
        eng.run([plans[0]], "i5-seq-0")
        base = state.footprint(eng.models)
        for p in plans[1:]:
            eng.run([p], f"i5-seq-{p.ext_id}")
    after = state.footprint(eng.models)
    grew = state.growth(base, after)
    record(containers=len(after), requests=len(plans))
    if grew:
        pytest.fail(
            "I5: model state grows over 100 sequential requests (after request 1 -> after request 100):\n  "
            + "\n  ".join(grew[:10]),
            pytrace=False,
        )


@pytest.mark.omnitts_check(checkids.I5_OUTPUTS_NOT_ALIASED)
def test_i5_outputs_not_aliased(ctx, record):
    """A step's outputs must not change when the next step runs (no views of persistent/static buffers)."""
    sub = ctx.subject
    run = ctx.composition("all_at_once")  # the shared run checks aliasing at every step
    violations = run.alias_violations
    record(violations=len(violations), pattern=sub.pattern)
    if violations:
        uniq = sorted(set(violations), key=violations.index)
        pytest.fail(
            f"I5: {len(violations)} outputs were overwritten after they were returned "
            "(the engine keeps them by reference):\n  " + "\n  ".join(uniq[:8]),
            pytrace=False,
        )
