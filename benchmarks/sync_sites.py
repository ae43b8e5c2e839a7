"""Every host sync of the I3 scenario, with its line and owner: the model, the model under a suppression, omnitts's
harness, or other code.

    python benchmarks/sync_sites.py [--models ref_single_stage,...] [--device cuda] [--out sync_sites.json]

The I3 check's scenario (4 concurrent requests, 10 tokens each, a warm-up run first on CUDA) runs in the harness with
the sync spy armed around every model call; each event of the dispatch spy and of ``torch.cuda.set_sync_debug_mode``
is listed with its step, whether the step was steady (every scheduled request decoding) and its site. The check
reports only what exceeds the budget; this lists everything, so an unexplained count can be traced to a line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def catalogs() -> tuple:
    """The installed model catalogs; the reference models' own where none is registered (the GPU machine's shim of
    the repo's folders has no entry points)."""
    import importlib

    from omnitts.validators.runtime.catalogs import installed

    return installed() or (importlib.import_module("omnitts.reference_models.names"),)


def owner(event) -> str:
    from omnitts.validators.runtime.syncspy import HARNESS, OUTSIDE

    if event.suppressed:
        return "model, suppressed"
    if event.in_model:
        return "model"
    if event.where.startswith(HARNESS):
        return "harness"
    if event.where.startswith(OUTSIDE):
        return "outside the model"
    return "unknown"


def sites(name: str, device: str) -> dict:
    from omnitts.validators.runtime import harness
    from omnitts.validators.runtime.loaders import load_subject
    from omnitts.validators.runtime.scenarios import compositions
    from omnitts.validators.runtime.syncspy import SyncSpy

    runner = getattr(harness, "Harness", None) or harness.Engine  # the harness's class, under either name
    sub = load_subject(name, catalogs(), device=device)
    plans, kw = compositions(sub)["all_at_once"]
    plans = [replace(p, max_tokens=min(p.max_tokens, 10)) for p in plans[:4]]  # as the I3 check runs it
    spy = SyncSpy(sub.model_files, device=device)
    if device == "cuda":
        runner(sub, device=device, **kw).run(plans, "warmup")
    eng = runner(sub, device=device, spy=spy, **kw)
    eng.spy_active = True
    run = eng.run(plans, "sync-sites")
    steady = {f"stage{s.stage} step {s.step}" for s in run.steps if s.steady}
    rep = spy.report
    rows = []
    for kind, events in (("dispatch spy", rep.events), ("set_sync_debug_mode", rep.debug_events)):
        for e in events:
            rows.append(
                {
                    "kind": kind,
                    "label": e.label,
                    "steady": e.label in steady,
                    "owner": owner(e),
                    "op": e.op,
                    "where": e.where,
                    "suppressed": e.suppressed,
                }
            )
    by_site = Counter((r["kind"], r["steady"], r["owner"], r["where"]) for r in rows)
    return {
        "model": name,
        "device": device,
        "steady_steps": len(steady),
        "budget_per_request_step": sub.sync_budget_per_request_step,
        "counts": {
            f"{kind} {'steady' if st else 'other'} {own}": n
            for (kind, st, own), n in Counter((r["kind"], r["steady"], r["owner"]) for r in rows).items()
        },
        "sites": [
            {"kind": k, "steady": st, "owner": own, "where": w, "count": n}
            for (k, st, own, w), n in by_site.most_common()
        ],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ref_two_stage,ref_single_stage,ref_native_ar")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rows = [sites(m, args.device) for m in args.models.split(",") if m]
    for r in rows:
        print(
            f"{r['model']} on {r['device']}: {r['steady_steps']} steady steps, budget "
            f"{r['budget_per_request_step']} per request and step"
        )
        for s in r["sites"]:
            print(
                f"  {s['count']:4d}x {s['kind']:19s} {'steady' if s['steady'] else 'other ':6s} "
                f"[{s['owner']}] {s['where']}"
            )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=2))
    unattributed = [s for r in rows for s in r["sites"] if s["owner"] == "unknown"]
    return 1 if unattributed else 0


if __name__ == "__main__":
    sys.exit(main())
