"""The model's integration points in its vLLM-Omni tree (registry, deploy YAML, serving), as `omnitts-scaffold check`
reports them; ticks the checklist items on the registry, the stage config and the serving points."""

from __future__ import annotations

import pytest

from omnitts.validators import checkids

pytestmark = pytest.mark.usefixtures("omnitts_model")

# checklist tick -> the scaffold check's points that make it up
_TICKS = {
    checkids.INTEGRATION_REGISTRY: ("registry",),
    checkids.INTEGRATION_DEPLOY: ("deploy",),
    checkids.INTEGRATION_SERVING: ("serving.", "adapter"),  # serving_speech.py points (0.20-0.26), TTS adapter (0.28+)
}


@pytest.mark.omnitts_check(checkids.INTEGRATION_POINTS)
def test_integration_points(ctx, record):
    sub = ctx.subject
    if sub.kind != "tree":
        pytest.skip(
            f"{sub.name} is not in a vLLM-Omni tree (registry and serving points exist only there: pass --omni-root)"
        )
    try:
        from omnitts.knowledge.eras import detect_profile
        from omnitts.scaffold.check import GAPS, check_model
    except ModuleNotFoundError as exc:
        pytest.fail(f"integration points: {exc.name} is missing, the check could not run (fail closed)", pytrace=False)
    root = sub.extra["root"]
    try:
        reports = check_model(detect_profile(root), sub.name)
    except Exception as exc:  # noqa: BLE001 - the check could not run: fail closed with its message
        pytest.fail(f"integration points of {sub.name} in {root}: {type(exc).__name__}: {exc}", pytrace=False)
    if not reports:
        pytest.fail(f"integration points: omnitts-scaffold check finds no model {sub.name!r} in {root}", pytrace=False)
    results = [r for report in reports for r in report.results]
    gaps = [r for r in results if r.status in GAPS]
    ticks = {}
    for tick, prefixes in _TICKS.items():
        mine = [r for r in results if r.point.startswith(prefixes)]
        if mine:
            ticks[tick] = "failed" if any(r.status in GAPS for r in mine) else "passed"
    record(
        points={r.point: r.status for r in results},
        gaps=[f"{r.point}: {r.status} {r.detail}" for r in gaps],
        extra_checks=ticks,
    )
    if gaps:
        pytest.fail(
            f"integration points of {sub.name}: {len(gaps)} gap(s)\n  "
            + "\n  ".join(f"{r.point}: {r.status} — {r.detail}" for r in gaps),
            pytrace=False,
        )
