"""The same checks on the same model through both tiers: wall time of the harness tier vs ``--engine offline``.

    python benchmarks/engine_vs_harness.py [--work DIR] [--md benchmarks/results/engine_vs_harness.md]

The subject is the single-stage pattern scaffolded into a copy of vLLM-Omni 0.30.0 (``tiny_single_stage``, as in
``benchmarks/engine_mutants.py``). The checks are the ones both tiers have: ``i1.duration_and_sr``,
``i4.concurrency`` and ``i2.consumer_forms``. In one run, one after the other:

1. harness, the same checks: ``pytest validators --omni-root TREE --model tiny_single_stage -k <the three harness
   check functions>``;
2. engine: the same command with ``--engine offline`` (its four offline checks carry those three ids; the tree's
   own ``Omni`` on CPU, one engine start);
3. for context, the whole harness tier (every runtime and static check).

Each is one ``pytest`` session in a subprocess, timed by wall clock from start to exit (start-up included), and
must pass. Prints the ratio engine / harness and writes a Markdown record with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import engine_mutants as em  # noqa: E402

HARNESS_SAME = "i1.duration_and_sr or i4.concurrency or i2.consumer_forms"
SHARED = ("i1.duration_and_sr", "i4.concurrency", "i2.consumer_forms")


LOCK = Path("/tmp/vllm_omni_device_0_init.lock")  # vLLM-Omni's device-init lock: one per machine, every engine


def _ours(pid: int) -> bool:
    """Whether ``pid`` descends from this script."""
    me = os.getpid()
    while pid > 1:
        if pid == me:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return False
    return False


def _holders() -> list[int]:
    try:
        inode = LOCK.stat().st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    return [int(f[4]) for f in (ln.split() for ln in lines) if len(f) > 5 and f[5].endswith(f":{inode}")]


class LockWatch(threading.Thread):
    """Seconds another engine on the machine held the device-init lock before ours first held it, and when ours
    first held it (vLLM-Omni locks /tmp/vllm_omni_device_<id>_init.lock machine-wide). An upper bound of the
    engine's queueing: part of that time ours was still importing and not yet asking for the lock."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.waited, self.took_at, self.done = 0.0, None, threading.Event()
        self.started = time.perf_counter()

    def run(self) -> None:
        while not self.done.wait(0.25):
            holders = _holders()
            if self.took_at is None and any(_ours(pid) for pid in holders):
                self.took_at = time.perf_counter() - self.started
            elif holders and self.took_at is None:
                self.waited += 0.25


def _session(python: Path, tree: Path, tier: str, out: Path, extra: list[str]) -> dict:
    load = os.getloadavg()[0]
    watch = LockWatch()
    watch.start()
    started = time.perf_counter()
    run = em.run_tier(python, tree, tier, out, timeout=1800, extra=extra)
    run["wall_s"] = round(time.perf_counter() - started, 1)
    watch.done.set()
    if tier != "harness":  # the harness tier starts no engine and takes no device lock
        run["lock_wait_s"] = round(watch.waited, 1)
        run["lock_took_at_s"] = None if watch.took_at is None else round(watch.took_at, 1)
        metrics = run.get("metrics", {}).get("i1.duration_and_sr", {})
        run["startup_s"] = metrics.get("startup_s")
    run["load_before"] = round(load, 1)
    run["load_after"] = round(os.getloadavg()[0], 1)
    return run


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp") / f"omnitts-engine-vs-harness-{os.getuid()}")
    ap.add_argument("--md", type=Path, default=em.REPO / "benchmarks" / "results" / "engine_vs_harness.md")
    ap.add_argument("--no-full", action="store_true", help="skip the whole-harness-tier context run")
    args = ap.parse_args(argv)

    args.work.mkdir(parents=True, exist_ok=True)
    tree = em.scaffold(args.work)
    harness_py = em.harness_python(args.work)
    from omnitts.validators.engine.session import model_dir_cache

    cached = model_dir_cache(tree, em.MODEL, "0.30.0").is_dir()
    runs = {
        "harness (same checks)": _session(harness_py, tree, "harness", args.work / "harness", ["-k", HARNESS_SAME]),
        "engine offline": _session(Path(sys.executable), tree, "offline", args.work / "offline", []),
    }
    if not args.no_full:
        runs["harness (whole tier)"] = _session(harness_py, tree, "harness", args.work / "harness-full", [])
    ok = True
    for name, run in runs.items():
        if "error" in run or any(s == "failed" for s in run["results"].values()):
            ok = False
        checks = {c: s for c, s in run.get("results", {}).items() if not c.startswith(("OMNI-", "static.I"))}
        print(f"{name}: {run['wall_s']} s ({run.get('pytest') or run.get('error')}); {checks}")
    harness, engine = runs["harness (same checks)"], runs["engine offline"]
    ratio = engine["wall_s"] / harness["wall_s"]
    own = (engine["wall_s"] - engine["lock_wait_s"]) / harness["wall_s"]
    print(f"engine offline / harness (same checks): {ratio:.1f}x; at least {own:.1f}x without the lock wait")

    def lock(run: dict) -> str:
        if "lock_wait_s" not in run:
            return "— (no engine)"
        return f"{run['startup_s']}; {run['lock_wait_s']}; {run['lock_took_at_s']}"

    def ran(run: dict) -> str:
        return ", ".join(f"{c} {s}" for c, s in sorted(run.get("results", {}).items()) if c in SHARED) or "—"

    lines = [
        "# Engine tier vs harness tier: the same checks, the same model, wall time",
        "",
        f"`python benchmarks/engine_vs_harness.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"{os.cpu_count()} CPU cores shared with other sessions (load average in the table). Model: the "
        "single-stage pattern scaffolded into a copy of vLLM-Omni 0.30.0 (`tiny_single_stage`); engine model "
        f"directory {'already cached' if cached else 'built in this run (included in the engine time)'}.",
        "Each row is one `pytest validators --omni-root TREE --model tiny_single_stage` session, wall clock from "
        "start to exit (interpreter and vLLM import included).",
        "",
        "| run | command extra | wall s | engine: Omni start-up s; other engines held the device lock before ours "
        "(s, an upper bound of queueing); ours first held it at (s) | load before / after | pytest | shared checks' "
        "outcomes |",
        "|---|---|---|---|---|---|---|",
    ]
    extras = {
        "harness (same checks)": f'`-k "{HARNESS_SAME}"`',
        "engine offline": "`--engine offline`",
        "harness (whole tier)": "(every harness check)",
    }
    for name, run in runs.items():
        lines.append(
            f"| {name} | {extras[name]} | {run['wall_s']} | {lock(run)} | "
            f"{run['load_before']} / {run['load_after']} | "
            f"{run.get('pytest') or run.get('error', '')[:120]} | {ran(run)} |"
        )
    full = runs.get("harness (whole tier)")
    versus_full = f" (engine / whole harness tier: {engine['wall_s'] / full['wall_s']:.1f}x)." if full else "."
    lines += [
        "",
        f"**Ratio engine offline / harness on the same checks: {ratio:.1f}x**{versus_full} Taking off all the time "
        f"other sessions' engines held the machine-wide device-init lock before ours (an upper bound of its "
        f"queueing): at least {own:.1f}x.",
        "",
    ]
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text("\n".join(lines))
    print(args.md)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
