"""The metamorphic rewrites applied to the rules' own VALID and INVALID cases: the third half of
`benchmarks/static_recall.py`.

The mined corpus holds no fixed source-visible I5 bug and no REF bug (the REF family came from the
field record after the corpus was mined), so its metamorphic table has no row for them. Each rule's
INVALID cases are small bugs with a known line: every rewrite of `benchmarks/metamorphic.py` that
applies to that line must still be reported by the rule on the rewritten lines (+-2). Each VALID case
is clean code: every rewrite of every statement line inside its functions must stay quiet (no finding
of the rule anywhere in the file). The cases are the rules' own examples, written beside the rules,
so this measures robustness to how the code is written, not recall on unseen bugs (that is the
held-out corpus's job).

    python benchmarks/static_recall.py --cases-only    # this half alone
"""

from __future__ import annotations

import ast
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

SLACK = 2


def _is_consumer(path: str) -> bool:
    return path.startswith(("examples/", "tests/", "benchmarks/")) or "/entrypoints/" in path


def _statement_lines(text: str) -> list[int]:
    """First lines of the simple statements inside functions (where a rewrite has something to move)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    out: set[int] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Expr | ast.Return) and (
                node.lineno == node.end_lineno
            ):
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                    continue  # docstrings
                out.add(node.lineno)
    return sorted(out)


def _lint(root: Path, rule, files: dict[str, str], path: str):
    from omnitts.validators.static import api

    shutil.rmtree(root, ignore_errors=True)
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    res = api.run([root / path], root=root, select=[rule.id])
    return [f for f in res.findings if f.rule == rule.id and Path(f.path).resolve() == (root / path).resolve()]


def case_rewrites(invariants: set[str] | None = None) -> dict:
    """Rows per rewritten case; per-invariant caught/total on INVALID and quiet/total on VALID."""
    from metamorphic import ALL, variant

    from omnitts.validators.static import linter

    rows = []
    start = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="omnitts-case-rewrites-"))
    try:
        for rid, rule in sorted(linter.all_rules().items()):
            if rule.scope != "file" or rule.invariant == "META":
                continue
            if invariants and rule.invariant not in invariants:
                continue
            for kind, cases in (("invalid", rule.INVALID), ("valid", rule.VALID)):
                for i, case in enumerate(cases):
                    files = case.all_files()
                    text = files[case.path]
                    if kind == "invalid":
                        if case.line is None:
                            continue
                        spans = [(case.line, case.line)]
                    else:
                        spans = [(n, n) for n in _statement_lines(text)]
                    for span in spans:
                        for name in ALL:
                            v = variant(text, case.path, span, name, _is_consumer(case.path))
                            if v is None:
                                continue
                            vfiles = {k: t for k, t in files.items() if k != case.path} | {v.path: v.text}
                            found = _lint(scratch / "t", rule, vfiles, v.path)
                            if kind == "invalid":
                                hit = [f for a, b in v.lines for f in found if a - SLACK <= f.line <= b + SLACK]
                                ok = bool(hit)
                            else:
                                ok = not found
                            rows.append(
                                {
                                    "rule": rid,
                                    "invariant": rule.invariant,
                                    "kind": kind,
                                    "case": i,
                                    "line": span[0],
                                    "transform": name,
                                    "ok": ok,
                                }
                            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    per: dict[str, dict[str, list[int]]] = {k: defaultdict(lambda: [0, 0]) for k in ("invalid", "valid")}
    for r in rows:
        per[r["kind"]][r["invariant"]][0] += r["ok"]
        per[r["kind"]][r["invariant"]][1] += 1
    return {
        "rows": rows,
        "caught": {k: per["invalid"][k] for k in sorted(per["invalid"])},
        "quiet": {k: per["valid"][k] for k in sorted(per["valid"])},
        "seconds": time.perf_counter() - start,
    }


def report_cases(m: dict) -> str:
    out = [
        "",
        "== the rules' own cases, rewritten (every rule's INVALID line; every statement of every VALID case)",
        "invariant  INVALID caught/rewrites  recall   VALID quiet/rewrites  FP per 20",
    ]
    for inv in sorted(set(m["caught"]) | set(m["quiet"])):
        c, t = m["caught"].get(inv, (0, 0))
        q, n = m["quiet"].get(inv, (0, 0))
        rec = f"{c / t:.2f}" if t else "  - "
        fp = f"{20 * (n - q) / n:.2f}" if n else "  - "
        out.append(f"{inv:<10} {c:>5}/{t:<5}                {rec}     {q:>5}/{n:<5}             {fp}")
    out.append(f"time: {m['seconds']:.0f} s")
    bad = [r for r in m["rows"] if not r["ok"]]
    out.append(f"rewritten cases missed or reported ({len(bad)}):")
    for r in bad:
        what = "missed" if r["kind"] == "invalid" else "reported"
        out.append(f"  {r['rule']} {r['kind'].upper()}[{r['case']}] line {r['line']} {r['transform']}: {what}")
    return "\n".join(out)
