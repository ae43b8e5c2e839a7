"""Regenerate the triage of docs/triage.md: lint the dedicated TTS models of vLLM-Omni 0.20.0 (sdist:
package, examples, tests) and 0.30.0 (wheel) exactly as the doc describes, match every finding to
the verdict table in the doc, and print precision per invariant.

Findings the table has no verdict for are listed as NEW (read each in the code and add a row);
rows the rules no longer produce are listed as GONE (delete them, or explain in the doc). The
exit status is 1 while either list is non-empty or any invariant's precision is below 0.9.

    python benchmarks/triage.py                  # both releases
    python benchmarks/triage.py --release 0.30.0
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "triage.md"
MODELS_DIR = "vllm_omni/model_executor/models/"
TARGET = 0.9

MODELS = {
    "0.20.0": "cosyvoice3 fish_speech moss_tts_nano omnivoice qwen3_tts voxcpm voxcpm2 voxtral_tts".split(),
    "0.30.0": (
        "audio8_tts breeze_tts_2 cosyvoice3 fish_speech gepard glm_tts higgs_audio_v2 higgs_audio_v3 indextts2 "
        "ming_tts moss_tts moss_tts_nano omnivoice qwen3_tts voxcpm2 voxtral_tts"
    ).split(),
}
_ROW = re.compile(r"^\| (?P<model>[\w.]+) \| `(?P<loc>[^`]+)` \| (?P<rule>OMNI-[A-Z0-9-]+) \| (?P<verdict>TP|FP) \|")
_HEAD = re.compile(r"^## (\d+\.\d+\.\d+)\s*$")


def consumer_files(tree: Path, models: list[str]) -> list[Path]:
    """0.20.0's TTS examples and tests (the sdist ships them): linted for I2."""
    out: set[Path] = set()
    for base in ("examples/offline_inference/text_to_speech", "examples/online_serving/text_to_speech"):
        out.update((tree / base).rglob("*.py"))
    for m in models:
        out.update((tree / "tests" / "e2e").rglob(f"test_{m}*.py"))
        out.update((tree / "tests" / "model_executor" / "models" / m).rglob("*.py"))
        out.update((tree / "tests" / "model_executor" / "stage_input_processors").glob(f"test_{m}*.py"))
    out.update((tree / "tests" / "entrypoints" / "openai_api").glob("test_serving_speech*.py"))
    return sorted(p for p in out if p.is_file() and p.name != "__init__.py")


def location(rel: str) -> str:
    return rel[len(MODELS_DIR) :] if rel.startswith(MODELS_DIR) else rel


def collect(release: str, tree: Path) -> list[tuple[str, str, str, int]]:
    """(model, location, rule, line) for every finding of the triage procedure."""
    from omnitts.validators.static import api
    from omnitts.validators.static.finding import Finding

    found: dict[tuple, tuple] = {}

    def add(model: str, findings: list[Finding]) -> None:
        for f in findings:
            if f.rule.startswith("OMNI-META"):
                continue
            p = Path(f.path)
            rel = p.resolve().relative_to(tree.resolve()).as_posix() if p.is_absolute() else f.path
            found.setdefault((location(rel), f.rule, f.line), (model, f"{location(rel)}:{f.line}", f.rule, f.line))

    for m in MODELS[release]:
        add(m, api.lint_model_package(tree / MODELS_DIR / m, tree_root=tree))
    if (tree / "examples").is_dir():
        for p in consumer_files(tree, MODELS[release]):
            rel = p.relative_to(tree).as_posix()
            model = next((m for m in MODELS[release] if m in rel), "-")
            add(model, [f for f in api.lint_paths([p], root=tree) if f.invariant == "I2"])
    return sorted(found.values(), key=lambda r: (r[0], r[1]))


def verdicts(doc: Path = DOC) -> dict[str, dict[tuple[str, str], str]]:
    """release -> (location, rule) -> TP/FP, from the doc's per-release tables."""
    out: dict[str, dict[tuple[str, str], str]] = defaultdict(dict)
    release = None
    for line in doc.read_text().splitlines():
        if m := _HEAD.match(line):
            release = m.group(1)
        elif release and (m := _ROW.match(line)):
            out[release][(m.group("loc"), m.group("rule"))] = m.group("verdict")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", action="append", choices=sorted(MODELS))
    args = ap.parse_args(argv)
    from omnitts.knowledge.releases import pristine_tree

    table = verdicts()
    ok = True
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for release in args.release or sorted(MODELS):
        rows = collect(release, pristine_tree(release))
        known = table.get(release, {})
        per_inv: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        new, seen = [], set()
        for model, loc, rule, _line in rows:
            v = known.get((loc, rule))
            seen.add((loc, rule))
            if v is None:
                new.append(f"  NEW {model} {loc} {rule}")
                continue
            inv = rule.split("-")[1]
            per_inv[inv][0] += v == "TP"
            per_inv[inv][1] += 1
            totals[inv][0] += v == "TP"
            totals[inv][1] += 1
        gone = [f"  GONE {loc} {rule}" for (loc, rule) in known if (loc, rule) not in seen]
        print(f"== {release}: {len(rows)} findings")
        for inv, (tp, n) in sorted(per_inv.items()):
            print(f"  {inv}: {tp}/{n} = {tp / n:.2f}")
        for line in new + gone:
            print(line)
        ok = ok and not new and not gone
    print("== both")
    for inv, (tp, n) in sorted(totals.items()):
        print(f"  {inv}: {tp}/{n} = {tp / n:.2f}")
        ok = ok and tp / n >= TARGET
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
