"""Run the runtime validators on every reference model and mutant; write docs/mutant_matrix.md.

    python benchmarks/mutant_matrix.py [--jobs 2] [--device cpu] [--out DIR] [--models a,b,...]

One pytest run (``pytest validators --model all -n JOBS``) produces ``results.json``; each row of the matrix says
which checks failed, whether a mutant failed a check that targets its bug (the catalog's ``expected_checks``, in the
vocabulary of ``omnitts.validators.checkids``; static rule ids are seen through the ``static.lint`` check), and the
first line of that check's failure message (which names the bug). A correct model must pass every check that ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _detail(message: str) -> str:
    """The headline of a failure plus its first finding (the line that names the bug)."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip() and not ln.strip().startswith("[gw")]
    if not lines:
        return ""
    head = lines[0]
    if len(lines) > 1 and len(head) < 200:
        return f"{head} — {lines[1]}"[:320]
    return head[:320]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="2")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=str(REPO / "omnitts-out" / "mutant_matrix"))
    ap.add_argument("--models", default="all")
    ap.add_argument("--doc", default=str(REPO / "docs" / "mutant_matrix.md"))
    ap.add_argument("--json", default=str(REPO / "benchmarks" / "results" / "mutant_matrix.json"))
    ap.add_argument("--check-timeout", default="120")
    args = ap.parse_args(argv)

    from omnitts.reference_models import catalog
    from omnitts.validators import checkids

    out = Path(args.out)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(REPO / "validators"),
        "--model",
        args.models,
        "--device",
        args.device,
        "--omnitts-out",
        str(out),
        "--check-timeout",
        args.check_timeout,
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    if args.jobs not in ("0", "1"):
        cmd += ["-n", args.jobs]
    from omnitts.validators.runtime.results import latest_run, runs

    before = {path for path, _ in runs(out)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ})
    wall = time.perf_counter() - t0
    tail = "\n".join(proc.stdout.splitlines()[-3:])
    run = latest_run(out, "harness")  # this run's folder under the results folder (not an earlier run's)
    results_path = run / "results.json" if run is not None and run not in before else out / "missing.json"
    if not results_path.is_file():
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        return 2
    results = json.loads(results_path.read_text())["models"]

    rows, ok = [], True
    for name in catalog.list_models():
        subj = catalog.get_subject(name)
        res = results.get(name)
        if res is None:
            rows.append({"model": name, "verdict": "NOT RUN"})
            ok = False
            continue
        failed = sorted(c for c, s in res["results"].items() if s == "failed")
        expected_ids = list(subj.expected_checks) if subj.is_mutant else []
        targets = checkids.targets(expected_ids)
        caught = [c for c in failed if c in targets]
        if not subj.is_mutant:
            verdict = "PASS" if not failed else "FAIL"
            ok = ok and not failed
            why = "; ".join(_detail(res["failures"].get(c, "")) for c in failed)
        elif caught:
            verdict = f"CAUGHT by {', '.join(caught)}"
            why = _detail(res["failures"].get(caught[0], ""))
        elif failed:
            verdict = f"caught by other checks ({', '.join(failed)}), not by {', '.join(targets)}"
            why = _detail(res["failures"].get(failed[0], ""))
            ok = False
        else:
            cuda_only = (checkids.DEVICE_CUDA, checkids.DEVICE_PLACEMENT, checkids.STATIC_LINT)
            only_cuda = targets and all(t in cuda_only for t in targets)
            verdict = (
                "needs CUDA / static rules (not observable on CPU)" if only_cuda and args.device == "cpu" else "MISSED"
            )
            why = ""
            ok = ok and only_cuda and args.device == "cpu"
        rows.append(
            {
                "model": name,
                "kind": "mutant" if subj.is_mutant else "reference",
                "bug": subj.bug or "",
                "description": subj.description or "",
                "expected": expected_ids,
                "targets": targets,
                "failed": failed,
                "verdict": verdict,
                "why": why,
                "skipped": sorted(c for c, s in res["results"].items() if s == "skipped"),
            }
        )

    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(
        json.dumps(
            {
                "device": args.device,
                "wall_s": round(wall, 1),
                "pytest": tail,
                "command": " ".join(cmd[1:]),
                "rows": rows,
            },
            indent=2,
        )
    )
    md = [
        "# Mutant matrix",
        "",
        f"Generated by `python benchmarks/mutant_matrix.py` ({args.device}, `-n {args.jobs}`, {wall:.0f} s wall; "
        f"pytest: `{tail.splitlines()[-1] if tail else ''}`).",
        "One row per reference model and mutant (`omnitts.reference_models.catalog.list_models()`). *Targets* are the "
        "runtime checks a mutant names (`omnitts.validators.checkids`; static rule ids count as `static.lint`, the "
        "check that runs them); a mutant is **caught** when one of its targets fails, and the quoted "
        "failure line is what the report says about it. Correct models must pass every check that ran (device-only "
        "checks such as the CUDA graph are skipped on CPU).",
        "",
        "| model | bug | targets | failed checks | verdict | report says |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "kind" not in r:
            md.append(f"| `{r['model']}` | | | | {r['verdict']} | |")
            continue
        why = r["why"].replace("|", "\\|").replace("\n", " ")
        md.append(
            f"| `{r['model']}` | {r['bug'] or '—'} | {', '.join(r['targets']) or '—'} | "
            f"{', '.join(r['failed']) or '—'} | {r['verdict']} | {why} |"
        )
    md += [
        "",
        "Overall: "
        + ("every mutant is caught by its target check and every correct model passes." if ok else "see rows above."),
        "",
    ]
    doc = Path(args.doc)
    # The "Engine tier" section is written by benchmarks/engine_mutants.py; keep it.
    kept = doc.read_text().partition("\n## Engine tier\n") if doc.is_file() else ("", "", "")
    doc.write_text("\n".join(md) + (f"\n## Engine tier\n{kept[2]}" if kept[1] else ""))
    print("\n".join(md))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
