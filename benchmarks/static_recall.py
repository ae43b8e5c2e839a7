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

Metamorphic robustness (`benchmarks/metamorphic.py`): every bug and look-alike is also rewritten by
code in every way that applies to it (rename locals/keys/attributes, extract a helper, pass the dict
as a parameter, a closure, a module function taking the model, alias, a temporary, index and while
loop forms, a move between examples/tests/benchmarks, the import form); each rewrite is linted on
its own in a hard-linked copy of the release tree. A rewritten bug is caught when a finding of its
invariant lies on its rewritten lines (+-2) and the same rewrite of the fixed release (where it
applies) has none on the fixed lines; a rewritten look-alike is a false positive like the plain one.

    python benchmarks/static_recall.py                 # plain and metamorphic tables, every miss and FP
    python benchmarks/static_recall.py --plain         # the plain corpus only
    python benchmarks/static_recall.py --json out.json # also writes the raw result
    python benchmarks/static_recall.py --cases-only    # the rules' own cases, rewritten (case_rewrites.py)

The rules' own VALID/INVALID cases rewritten the same ways (`benchmarks/case_rewrites.py`) are printed last
with the full corpus: the corpus holds no I5 and no REF bug, so that table is where those rewrites are
measured; it has no target (the cases were written beside the rules) and does not change the exit status.

Exit status 0 when recall >= 0.9 (per invariant, plain and metamorphic) and false positives <= 1 per
20 look-alikes (plain and rewritten), else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
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


def _hits_runs(findings, invariant: str, runs, slack: int) -> list:
    return [f for a, b in runs for f in _hits(findings, invariant, a - slack, b + slack)]


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


def _is_consumer(path: str) -> bool:
    return path.startswith(("examples/", "tests/", "benchmarks/")) or "/entrypoints/" in path


class ScratchTree:
    """A hard-linked copy of a release tree: a rewritten file replaces its link (never the cached file)."""

    def __init__(self, root: Path) -> None:
        self.pristine = root
        self.dir = Path(tempfile.mkdtemp(prefix="omnitts-metamorphic-"))
        self.root = self.dir / "tree"
        try:
            shutil.copytree(root, self.root, copy_function=os.link, symlinks=True)
        except OSError:  # another file system: a plain copy
            shutil.rmtree(self.root, ignore_errors=True)
            shutil.copytree(root, self.root, symlinks=True)

    def lint(self, rel: str, text: str, original: str | None) -> list:
        """Findings on ``rel`` holding ``text``; ``original`` is the path the text came from (restored after)."""
        from omnitts.validators.static import api

        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists() or target.is_symlink():
            target.unlink()  # break the hard link first: the cached release is never written
        target.write_text(text, encoding="utf-8")
        try:
            res = api.run([target], root=self.root, focus={rel})
            if res.errors:
                raise SystemExit(f"lint errors on a rewrite of {rel}: {res.errors[:3]}")
            return [f for f in res.findings if Path(f.path).resolve() == target.resolve()]
        finally:
            target.unlink()
            if original is not None and original == rel and (self.pristine / rel).exists():
                os.link(self.pristine / rel, target)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def metamorphic(corpus: dict, tree_of) -> dict:
    """Lint every applicable rewrite of every corpus item; see the module docstring for the scoring."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from metamorphic import ALL, variant

    items = [(b, True) for b in corpus["bugs"]] + [(o, False) for o in corpus["lookalikes"]]
    by_release: dict[str, list] = defaultdict(list)
    for it, is_bug in items:
        by_release[it["release"]].append((it, is_bug))
        if is_bug and it.get("fixed_lines"):
            by_release[it["fixed_release"]]  # noqa: B018 (make sure the tree is prepared)
    trees: dict[str, ScratchTree] = {}
    fixed_cache: dict[tuple, list | None] = {}

    def tree(release: str) -> ScratchTree:
        if release not in trees:
            trees[release] = ScratchTree(tree_of(release))
        return trees[release]

    def fixed_hits(bug: dict, name: str) -> list | None:
        """Findings of the bug's invariant on the fixed lines of the fixed release, rewritten the same way
        (or as released where the rewrite does not apply there); None when there is nothing to compare."""
        fixed_path = bug.get("fixed_path", bug["path"])
        root = tree_of(bug["fixed_release"])
        if not bug.get("fixed_lines") or not (root / fixed_path).is_file():
            return None
        key = (bug["id"], name)
        if key not in fixed_cache:
            text = (root / fixed_path).read_text(encoding="utf-8")
            span = tuple(bug["fixed_lines"])
            v = variant(text, fixed_path, span, name, _is_consumer(fixed_path))
            if v is None:
                v_text, v_path, v_runs = text, fixed_path, (span,)
            else:
                v_text, v_path, v_runs = v.text, v.path, v.lines
            found = tree(bug["fixed_release"]).lint(v_path, v_text, fixed_path)
            fixed_cache[key] = _hits_runs(found, bug["invariant"], v_runs, SLACK)
        return fixed_cache[key]

    rows = []
    start = time.perf_counter()
    try:
        for release in sorted(by_release, key=lambda v: tuple(int(x) for x in v.split("."))):
            for it, is_bug in by_release[release]:
                root = tree_of(release)
                text = (root / it["path"]).read_text(encoding="utf-8")
                applied = 0
                for name in ALL:
                    v = variant(text, it["path"], tuple(it["lines"]), name, _is_consumer(it["path"]))
                    if v is None:
                        continue
                    applied += 1
                    found = tree(release).lint(v.path, v.text, it["path"])
                    if is_bug:
                        on_bug = _hits_runs(found, it["invariant"], v.lines, SLACK)
                        still = fixed_hits(it, name) if on_bug else None
                        caught = bool(on_bug) and not still
                        rows.append(
                            {
                                "id": it["id"],
                                "kind": "bug",
                                "invariant": it["invariant"],
                                "visible": it.get("source_visible", True),
                                "transform": name,
                                "caught": caught,
                                "miss": ""
                                if caught
                                else ("no finding" if not on_bug else "still reported after the fix"),
                            }
                        )
                    else:
                        hits = _hits_runs(found, it["invariant"], v.lines, 0)
                        rows.append(
                            {
                                "id": it["id"],
                                "kind": "lookalike",
                                "invariant": it["invariant"],
                                "transform": name,
                                "fp": bool(hits),
                                "rules": sorted({f.rule for f in hits}),
                            }
                        )
                rows.append({"id": it["id"], "kind": "count", "applied": applied, "is_bug": is_bug})
    finally:
        for t in trees.values():
            t.close()
    bugs = [r for r in rows if r["kind"] == "bug" and r["visible"]]
    per_inv: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    per_tf: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in bugs:
        per_inv[r["invariant"]][0] += r["caught"]
        per_inv[r["invariant"]][1] += 1
        per_tf[r["transform"]][0] += r["caught"]
        per_tf[r["transform"]][1] += 1
    oks = [r for r in rows if r["kind"] == "lookalike"]
    fps = [r for r in oks if r["fp"]]
    counts = {r["id"]: r["applied"] for r in rows if r["kind"] == "count"}
    return {
        "rows": rows,
        "per_invariant": {k: per_inv[k] for k in sorted(per_inv)},
        "per_transform": {k: per_tf[k] for k in sorted(per_tf)},
        "caught": sum(c for c, _ in per_inv.values()),
        "total": sum(t for _, t in per_inv.values()),
        "lookalike_variants": len(oks),
        "false_positives": fps,
        "fp_per_20": 20 * len(fps) / len(oks) if oks else 0.0,
        "rewrites_per_item": counts,
        "seconds": time.perf_counter() - start,
    }


def metamorphic_ok(m: dict) -> bool:
    return all(c / t >= RECALL_TARGET for c, t in m["per_invariant"].values()) and m["fp_per_20"] <= FP_PER_20


def report_metamorphic(m: dict) -> str:
    out = [
        "",
        "== metamorphic: every applicable rewrite of every bug and look-alike",
        "invariant  caught/rewrites  recall",
    ]
    for inv, (c, t) in m["per_invariant"].items():
        out.append(f"{inv:<10} {c:>4}/{t:<4}          {c / t:.2f}")
    total = m["total"]
    out.append(
        f"overall    {m['caught']:>4}/{total:<4}          {m['caught'] / total if total else 0:.2f}   "
        f"(target >= {RECALL_TARGET} per invariant)"
    )
    out.append(
        f"false positives: {len(m['false_positives'])} on {m['lookalike_variants']} rewritten look-alikes "
        f"= {m['fp_per_20']:.2f} per 20   (target <= {FP_PER_20})"
    )
    out.append("by rewrite (bugs): " + ", ".join(f"{k} {c}/{t}" for k, (c, t) in m["per_transform"].items()))
    n = m["rewrites_per_item"]
    few = sorted(k for k, v in n.items() if v < 5)
    out.append(
        f"rewrites per item: min {min(n.values())}, median {sorted(n.values())[len(n) // 2]}, "
        f"max {max(n.values())}; fewer than 5: {', '.join(few) if few else 'none'}"
    )
    out.append(f"time: {m['seconds']:.0f} s")
    misses = [r for r in m["rows"] if r["kind"] == "bug" and r["visible"] and not r["caught"]]
    out.append(f"rewritten misses ({len(misses)}):")
    for r in misses:
        out.append(f"  {r['id']}  [{r['invariant']}] {r['transform']}: {r['miss']}")
    out.append(f"rewritten false positives ({len(m['false_positives'])}):")
    for r in m["false_positives"]:
        out.append(f"  {r['id']}  [{r['invariant']}] {r['transform']}: {','.join(r['rules'])}")
    return "\n".join(out)


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
    ap.add_argument("--plain", action="store_true", help="skip the metamorphic rewrites")
    ap.add_argument("--items", help="metamorphic half on the corpus items whose id matches this regex only")
    ap.add_argument("--cases-only", action="store_true", help="only the rules' own cases, rewritten")
    args = ap.parse_args(argv)
    from omnitts.knowledge.releases import pristine_tree

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from case_rewrites import case_rewrites, report_cases

    if args.cases_only:
        cases = case_rewrites()
        print(report_cases(cases).lstrip("\n"))
        if args.json:
            args.json.write_text(json.dumps({"cases": cases}, indent=1, default=str))
        return 0

    corpus = load_corpus(args.corpus)
    found, seconds = lint_releases(corpus, pristine_tree)
    result = score(corpus, found, pristine_tree)
    text = report(result, seconds)
    ok = all(c / t >= RECALL_TARGET for c, t in result["per_invariant"].values()) and result["fp_per_20"] <= FP_PER_20
    print(text[: text.rfind("\n")])  # without the verdict line: it comes last
    if not args.plain:
        mcorpus = corpus
        if args.items:
            pick = re.compile(args.items)
            mcorpus = {
                k: [x for x in v if pick.search(x["id"])] if isinstance(v, list) else v for k, v in corpus.items()
            }
        m = metamorphic(mcorpus, pristine_tree)
        result["metamorphic"] = {k: v for k, v in m.items() if k != "rows"} | {"rows": m["rows"]}
        print(report_metamorphic(m))
        ok = ok and metamorphic_ok(m)
        if args.corpus == CORPUS and not args.items:
            # Informational (no target): the invariants the corpus has no bug of are measured here.
            cases = case_rewrites()
            result["cases"] = cases
            print(report_cases(cases))
    print("PASS" if ok else "FAIL")
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
