"""Recall of omnitts-lint's static rules on real bugs that shipped in vLLM-Omni, and false positives on
clean look-alikes, from the labelled corpus `benchmarks/corpus/static_recall.json`.

The corpus names locations only (release, path, lines); the code is read from the PyPI releases
(fetched into `$OMNITTS_CACHE`). Each release is linted once, over every corpus file it holds, with
all rules and the release's own tree facts (its request-id keys, its declared dependencies).

Scoring:
- a bug is caught when a finding of its invariant lies on its lines (+-2) in the buggy release and the
  fixed release has no finding of that invariant on the fixed lines (+-2) (or no longer has the file);
- a look-alike is a false positive when a finding of its invariant lands on its lines;
- recall counts source-visible bugs only (`source_visible: false` marks defects no reader of the
  source alone can see, e.g. hop-length arithmetic on correct-looking code); they are listed apart.

    python benchmarks/static_recall.py                 # prints the table, every miss and FP
    python benchmarks/static_recall.py --json out.json # also writes the raw result

Exit status 0 when recall >= 0.9 and false positives <= 1 per 20 look-alikes, else 1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "benchmarks" / "corpus" / "static_recall.json"
SLACK = 2
RECALL_TARGET = 0.9
FP_PER_20 = 1.0


def load_corpus(path: Path = CORPUS) -> dict:
    return json.loads(path.read_text())


def lint_releases(corpus: dict, tree_of) -> tuple[dict[str, dict[str, list]], dict[str, float]]:
    """release -> path -> findings, linting each release once over the corpus files it holds."""
    from omnitts.validators.static import api

    wanted: dict[str, set[str]] = defaultdict(set)
    for bug in corpus["bugs"]:
        wanted[bug["release"]].add(bug["path"])
        wanted[bug["fixed_release"]].add(bug.get("fixed_path", bug["path"]))
    for ok in corpus["lookalikes"]:
        wanted[ok["release"]].add(ok["path"])
    found: dict[str, dict[str, list]] = {}
    seconds: dict[str, float] = {}
    for release in sorted(wanted, key=lambda v: tuple(int(x) for x in v.split("."))):
        root = tree_of(release)
        files = [root / p for p in sorted(wanted[release]) if (root / p).is_file()]
        start = time.perf_counter()
        # focus: tree-scope rules (output consolidation, configs) look at the corpus files too
        res = api.run(files, root=root, focus={p for p in wanted[release] if (root / p).is_file()})
        seconds[release] = time.perf_counter() - start
        if res.errors:
            raise SystemExit(f"lint errors on {release}: {res.errors[:3]}")
        by_path: dict[str, list] = defaultdict(list)
        for f in res.findings:
            p = Path(f.path)
            rel = p.resolve().relative_to(root.resolve()).as_posix() if p.is_absolute() else f.path
            by_path[rel].append(f)
        found[release] = by_path
    return found, seconds


def _hits(findings, invariant: str, lo: int, hi: int) -> list:
    return [f for f in findings if f.invariant == invariant and lo <= f.line <= hi]


def score(corpus: dict, found: dict[str, dict[str, list]], tree_of) -> dict:
    bugs_out = []
    for bug in corpus["bugs"]:
        a, b = bug["lines"]
        on_bug = _hits(found[bug["release"]].get(bug["path"], []), bug["invariant"], a - SLACK, b + SLACK)
        fixed_path = bug.get("fixed_path", bug["path"])
        still = []
        if bug.get("fixed_lines") and (tree_of(bug["fixed_release"]) / fixed_path).is_file():
            fa, fb = bug["fixed_lines"]
            still = _hits(found[bug["fixed_release"]].get(fixed_path, []), bug["invariant"], fa - SLACK, fb + SLACK)
        caught = bool(on_bug) and not still
        why = "" if caught else ("no finding on the buggy lines" if not on_bug else "still reported after the fix")
        bugs_out.append(
            {
                "id": bug["id"],
                "invariant": bug["invariant"],
                "visible": bug.get("source_visible", True),
                "caught": caught,
                "miss": why,
                "rules": sorted({f.rule for f in on_bug}),
                "where": f"{bug['release']} {bug['path']}:{a}-{b}",
                "why": bug["why"],
            }
        )
    fps = []
    for ok in corpus["lookalikes"]:
        a, b = ok["lines"]
        hits = _hits(found[ok["release"]].get(ok["path"], []), ok["invariant"], a, b)
        if hits:
            fps.append(
                {
                    "id": ok["id"],
                    "where": f"{ok['release']} {ok['path']}:{a}-{b}",
                    "rules": sorted({f.rule for f in hits}),
                    "why": ok["why"],
                }
            )
    per_inv: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in bugs_out:
        if r["visible"]:
            per_inv[r["invariant"]][1] += 1
            per_inv[r["invariant"]][0] += r["caught"]
    caught = sum(c for c, _ in per_inv.values())
    total = sum(t for _, t in per_inv.values())
    n_ok = len(corpus["lookalikes"])
    return {
        "bugs": bugs_out,
        "false_positives": fps,
        "per_invariant": {k: per_inv[k] for k in sorted(per_inv)},
        "recall": caught / total if total else 0.0,
        "caught": caught,
        "visible": total,
        "lookalikes": n_ok,
        "fp_per_20": 20 * len(fps) / n_ok if n_ok else 0.0,
    }


def report(result: dict, seconds: dict[str, float]) -> str:
    out = ["invariant  caught/visible  recall"]
    for inv, (c, t) in result["per_invariant"].items():
        out.append(f"{inv:<10} {c:>3}/{t:<3}          {c / t:.2f}")
    ok = result["recall"] >= RECALL_TARGET and result["fp_per_20"] <= FP_PER_20
    out.append(
        f"overall    {result['caught']:>3}/{result['visible']:<3}          {result['recall']:.2f}   "
        f"(target >= {RECALL_TARGET})"
    )
    hidden = [b for b in result["bugs"] if not b["visible"]]
    out.append(f"not source-visible (outside recall): {len(hidden)}")
    out.append(
        f"false positives: {len(result['false_positives'])} on {result['lookalikes']} look-alikes "
        f"= {result['fp_per_20']:.2f} per 20   (target <= {FP_PER_20})"
    )
    out.append("lint time per release (s): " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
    out.append("")
    misses = [b for b in result["bugs"] if b["visible"] and not b["caught"]]
    out.append(f"misses ({len(misses)}):")
    for b in misses:
        out.append(f"  {b['id']}  [{b['invariant']}] {b['where']}: {b['miss']}; {b['why']}")
    out.append(f"false positives ({len(result['false_positives'])}):")
    for fp in result["false_positives"]:
        out.append(f"  {fp['id']}  {fp['where']} {','.join(fp['rules'])}: {fp['why']}")
    out.append("not source-visible:")
    for b in hidden:
        out.append(f"  {b['id']}  {b['where']}: {'caught' if b['caught'] else 'not caught'}")
    out.append("PASS" if ok else "FAIL")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--json", type=Path, help="write the raw result here")
    args = ap.parse_args(argv)
    from omnitts.knowledge.releases import pristine_tree

    corpus = load_corpus(args.corpus)
    found, seconds = lint_releases(corpus, pristine_tree)
    result = score(corpus, found, pristine_tree)
    print(report(result, seconds))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return 0 if result["recall"] >= RECALL_TARGET and result["fp_per_20"] <= FP_PER_20 else 1


if __name__ == "__main__":
    sys.exit(main())
