"""Median wall time of `omnitts-scaffold new` on the vLLM-Omni 0.20.0 tree (download excluded), and where it goes.

Usage: python benchmarks/scaffold_latency.py [--repeat 7] [--version 0.20.0]
Target (issue 2): under 1 second per model on the 2-core CI machines.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from omnitts.knowledge.eras import detect_profile
from omnitts.knowledge.releases import pristine_tree
from omnitts.scaffold import new
from omnitts.scaffold.naming import PATTERNS, make_names


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def one_run(pristine: Path, pattern: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        shutil.copytree(pristine, root)
        names = make_names(f"bench_{pattern.replace('-', '_')}", pattern)
        phases = {}
        profile, phases["detect era"] = timed(detect_profile, root)
        total_start = time.perf_counter()
        plan, phases["plan (render + codemods + READMEs)"] = timed(new.plan_new, profile, names)
        _, phases["apply (write files)"] = timed(plan.apply)
        phases["total new"] = phases["detect era"] + time.perf_counter() - total_start
        return phases


def breakdown(pristine: Path, pattern: str) -> dict[str, float]:
    """Where the plan's time goes, measured serially (one process)."""
    from omnitts.scaffold.naming import template_context
    from omnitts.scaffold.plan import read_for_patch
    from omnitts.scaffold.render import render_pattern, render_shared

    names = make_names("bench_model", pattern)
    profile = detect_profile(pristine)
    ctx = template_context(names)
    out = {}
    _, out["render pattern template (cookiecutter)"] = timed(render_pattern, pattern, ctx)
    _, out["render shared template (cookiecutter)"] = timed(render_shared, ctx)
    by_file: dict[str, list] = {}
    for patch in new.shared_file_patches(profile, names):
        by_file.setdefault(patch.rel, []).append(patch)
    for rel, patches in by_file.items():
        _, out[f"codemod {Path(rel).name}"] = timed(new._run_file_patches, (patches, read_for_patch(pristine, rel)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--version", default="0.20.0", help="any supported release (0.20-0.30)")
    args = parser.parse_args()
    pristine = pristine_tree(args.version)  # downloaded once, not timed
    print(f"vllm-omni {args.version} tree: {pristine}")
    for pattern in PATTERNS:
        runs = [one_run(pristine, pattern) for _ in range(args.repeat)]
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"\n{pattern}: median of {args.repeat} runs")
        for phase, seconds in med.items():
            print(f"  {phase:<40} {seconds * 1000:8.1f} ms")
        verdict = "meets" if med["total new"] < 1.0 else "MISSES"
        print(f"  -> {verdict} the 1 s target ({med['total new']:.2f} s)")
    print("\nserial breakdown of the plan (two-stage, one process):")
    for what, seconds in breakdown(pristine, "two-stage").items():
        print(f"  {what:<40} {seconds * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
