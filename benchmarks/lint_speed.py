"""Lint speed of omnitts-lint against the anchors, on the vllm-omni 0.30.0 package.

Runs, in one go and on the same machine state, for the whole package (1,609 files) and its
`model_executor/models` subtree (441 files):

- omnitts-lint with every rule: cold (no cache), warm (content-hash cache filled), and the
  pre-commit case (20 changed model files, cold);
- a bare single-process `ast.parse` loop over every file (the reference the targets are stated in);
- ruff (`--select ALL` and default rules), Fixit (`fixit lint`, default rules) and TorchFix (CLI).

Every command runs as a subprocess and is timed wall-clock (median of --repeat runs; the slow
anchors once). Missing tools are installed into a temporary virtualenv (`--tool-venv`), or reported
as missing in the output; they never fail the run silently.

    python benchmarks/lint_speed.py                      # fetches vllm-omni 0.30.0 from PyPI (cached)
    python benchmarks/lint_speed.py --tree /path/to/vllm-omni-0.30.0 --skip fixit,torchfix
    python benchmarks/lint_speed.py --out benchmarks/results/lint_speed.md

Targets: whole package <= 1.5x the bare ast.parse time; warm re-run < 0.5 s; 20-file pre-commit < 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AST_LOOP = (
    "import ast, pathlib, sys\n"
    "for p in sorted(pathlib.Path(sys.argv[1]).rglob('*.py')):\n"
    "    try:\n"
    "        ast.parse(p.read_bytes())\n"
    "    except (SyntaxError, ValueError):\n"
    "        pass\n"
)


def run(cmd: list[str], env: dict | None = None, ok=(0, 1)) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    dt = time.perf_counter() - t
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd[:4])}... exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return dt


def timed(cmd: list[str], repeat: int, env: dict | None = None, ok=(0, 1)) -> float:
    return statistics.median(run(cmd, env, ok) for _ in range(repeat))


def ensure_tools(venv: Path, skip: set[str]) -> dict[str, str | None]:
    """Paths of fixit/torchfix/ruff executables; installs fixit/torchfix into a venv when missing."""
    tools: dict[str, str | None] = {"ruff": shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")}
    if not Path(tools["ruff"]).exists():
        tools["ruff"] = None
    wanted = {"fixit": "fixit==2.2.1", "torchfix": "torchfix==0.7.0"}
    for name in list(wanted):
        if name in skip:
            tools[name] = None
            wanted.pop(name)
            continue
        found = shutil.which(name) or (str(venv / "bin" / name) if (venv / "bin" / name).exists() else None)
        tools[name] = found
        if found:
            wanted.pop(name)
    if wanted:
        print(f"installing {', '.join(wanted.values())} into {venv} ...", file=sys.stderr)
        try:
            if not (venv / "bin" / "python").exists():
                subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run(
                [str(venv / "bin" / "pip"), "install", "-q", *wanted.values()],
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name in wanted:
                tools[name] = str(venv / "bin" / name)
        except (subprocess.CalledProcessError, OSError) as exc:
            print(f"could not install {', '.join(wanted)}: {exc}; reported as missing", file=sys.stderr)
    return tools


def resolve_tree(args) -> Path:
    if args.tree:
        return Path(args.tree)
    os.environ.setdefault("OMNITTS_CACHE", str(REPO / ".cache"))
    from omnitts.knowledge import releases

    return releases.pristine_tree(args.version)


def precommit_files(models: Path, n: int = 20) -> list[str]:
    files = sorted(p for p in models.rglob("*.py") if p.stat().st_size > 2000)
    step = max(1, len(files) // n)
    return [str(p) for p in files[::step][:n]]


def peer_env(src: Path) -> dict:
    """An environment whose `omnitts.*` packages are those of the checkout ``src`` (a path entry ahead of this
    checkout's editable install, mapping its top-level folders as setup.py does)."""
    shim = Path(tempfile.mkdtemp(prefix="omnitts-bench-peer-")) / "omnitts"
    shim.mkdir()
    for name in ("knowledge", "reference_models", "scaffold", "templates", "validators"):
        if (src / name).is_dir():
            (shim / name).symlink_to((src / name).resolve())
    return {**os.environ, "PYTHONPATH": str(shim.parent)}


def interleaved(target: Path, lint: list[str], py: str, peer: Path, args) -> dict[str, float]:
    """Median of --repeat rounds, each round ast.parse, this checkout's cold lint and the peer's, in turn."""
    env = peer_env(peer)
    probe = [py, "-c", "import omnitts.validators.static.cli as m; print(m.__file__)"]
    where = subprocess.run(probe, env=env, capture_output=True, text=True, check=True).stdout.strip()
    if not where.startswith(str(env["PYTHONPATH"])):
        raise RuntimeError(f"the peer checkout is not the one imported: {where}")
    cmd = [str(target), "--no-cache", "--jobs", str(args.jobs), "--format", "json", "--no-baseline"]
    times: dict[str, list[float]] = {"ast.parse, interleaved": [], "omnitts-lint cold, interleaved": []}
    times[f"peer omnitts-lint cold ({peer})"] = []
    for _ in range(args.repeat):
        times["ast.parse, interleaved"].append(run([py, "-c", AST_LOOP, str(target)]))
        times["omnitts-lint cold, interleaved"].append(run([*lint, *cmd]))
        times[f"peer omnitts-lint cold ({peer})"].append(run([*lint, *cmd], env))
    return {k: statistics.median(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", help="an extracted vllm-omni release (default: fetch --version from PyPI)")
    ap.add_argument("--version", default="0.30.0")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cpus", type=int, help="pin the run (and every tool) to this many CPUs, e.g. 2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated: fixit,torchfix,ruff")
    ap.add_argument("--tool-venv", default=str(Path(tempfile.gettempdir()) / "omnitts-bench-tools"))
    ap.add_argument("--out", help="write a markdown report here")
    ap.add_argument(
        "--peer-src",
        help="another omnitts checkout (e.g. a worktree of main): its cold lint is timed interleaved with this "
        "checkout's and ast.parse, one round each in turn, so that a busy shared machine slows all three alike",
    )
    args = ap.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    if args.cpus:
        os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[: args.cpus]))
    # Work on a copy outside any git work tree: Fixit (trailrunner) skips git-ignored paths, and the
    # PyPI cache lives in the ignored .cache/ of this repository.
    scratch = Path(tempfile.mkdtemp(prefix="omnitts-bench-tree-"))
    tree = scratch / "tree"
    shutil.copytree(resolve_tree(args), tree)
    pkg = tree / "vllm_omni"
    targets = {"package": pkg, "models": pkg / "model_executor" / "models"}
    tools = ensure_tools(Path(args.tool_venv), skip)
    lint = [sys.executable, "-m", "omnitts.validators.static.cli"]
    py = sys.executable
    cache = Path(tempfile.mkdtemp(prefix="omnitts-bench-cache-"))
    env = {**os.environ, "OMNITTS_CACHE": str(cache)}

    rows: dict[str, dict[str, float | None]] = {}
    counts = {k: sum(1 for _ in v.rglob("*.py")) for k, v in targets.items()}
    for key, target in targets.items():
        r: dict[str, float | None] = {}
        print(f"[{key}] {counts[key]} files", file=sys.stderr)
        r["ast.parse (1 process)"] = timed([py, "-c", AST_LOOP, str(target)], args.repeat)
        if args.peer_src:
            r.update(interleaved(target, lint, py, Path(args.peer_src), args))
        r["omnitts-lint cold"] = timed(
            [*lint, str(target), "--no-cache", "--jobs", str(args.jobs), "--format", "json", "--no-baseline"],
            args.repeat,
        )
        r["omnitts-lint cold, 1 job"] = timed(
            [*lint, str(target), "--no-cache", "--jobs", "1", "--format", "json", "--no-baseline"], 1
        )
        run([*lint, str(target), "--jobs", str(args.jobs), "--format", "json", "--no-baseline"], env)  # fill the cache
        r["omnitts-lint warm (cache)"] = timed(
            [*lint, str(target), "--jobs", str(args.jobs), "--format", "json", "--no-baseline"], args.repeat, env
        )
        if tools.get("ruff"):
            r["ruff --select ALL"] = timed(
                [
                    tools["ruff"],
                    "check",
                    "--isolated",
                    "--select",
                    "ALL",
                    "--no-cache",
                    "--exit-zero",
                    "-q",
                    str(target),
                ],
                args.repeat,
            )
            r["ruff (default rules)"] = timed(
                [tools["ruff"], "check", "--isolated", "--no-cache", "--exit-zero", "-q", str(target)], args.repeat
            )
        else:
            r["ruff --select ALL"] = r["ruff (default rules)"] = None
        for name, cmd in (
            ("fixit lint", [tools.get("fixit"), "lint", str(target)]),
            ("torchfix", [tools.get("torchfix"), str(target)]),
        ):
            if cmd[0] is None:
                r[name] = None
                continue
            print(f"[{key}] {name} (slow) ...", file=sys.stderr)
            r[name] = run(cmd, ok=tuple(range(0, 256)))
        rows[key] = r

    files20 = precommit_files(targets["models"])
    pre = {
        "omnitts-lint, 20 files, cold": timed(
            [*lint, *files20, "--no-cache", "--jobs", str(args.jobs), "--no-baseline"], args.repeat
        ),
        "omnitts-lint, 20 files, warm": timed(
            [*lint, *files20, "--jobs", str(args.jobs), "--no-baseline"], args.repeat, env
        ),
    }
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(scratch, ignore_errors=True)

    report = render(rows, pre, counts, tools, args)
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
    ok = (
        rows["package"]["omnitts-lint cold"] <= 1.5 * rows["package"]["ast.parse (1 process)"]
        and rows["package"]["omnitts-lint warm (cache)"] < 0.5
        and pre["omnitts-lint, 20 files, cold"] < 1.0
    )
    print(json.dumps({"targets_met": ok}), file=sys.stderr)
    return 0


def _fmt(v: float | None) -> str:
    return "missing" if v is None else f"{v:.2f} s"


def render(rows, pre, counts, tools, args) -> str:
    base = {k: rows[k]["ast.parse (1 process)"] for k in rows}
    out = [
        "# Lint speed: omnitts-lint vs. the anchors (vllm-omni 0.30.0)",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {len(os.sched_getaffinity(0))} of "
        f"{os.cpu_count()} CPUs usable; "
        f"`--jobs {args.jobs}`, median of {args.repeat} runs (Fixit/TorchFix: 1 run). Every command is a fresh "
        "process, wall-clock, interpreter start-up included. Ratio = time / bare `ast.parse` time of the same tree.",
        "",
        f"| command | package ({counts['package']} files) | ratio | models ({counts['models']} files) | ratio |",
        "|---|---|---|---|---|",
    ]
    for name in rows["package"]:
        cells = []
        for k in ("package", "models"):
            v = rows[k][name]
            cells += [_fmt(v), "—" if v is None else f"{v / base[k]:.2f}x"]
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    out += ["", "| pre-commit case | time |", "|---|---|"]
    out += [f"| {k} | {_fmt(v)} |" for k, v in pre.items()]
    pkg = rows["package"]
    out += [
        "",
        "Targets:",
        f"- whole package <= 1.5x bare ast.parse: {pkg['omnitts-lint cold'] / base['package']:.2f}x "
        f"({'met' if pkg['omnitts-lint cold'] <= 1.5 * base['package'] else 'NOT met'})",
        f"- warm re-run < 0.5 s: {pkg['omnitts-lint warm (cache)']:.2f} s "
        f"({'met' if pkg['omnitts-lint warm (cache)'] < 0.5 else 'NOT met'})",
        f"- 20-file pre-commit < 1 s: {pre['omnitts-lint, 20 files, cold']:.2f} s "
        f"({'met' if pre['omnitts-lint, 20 files, cold'] < 1.0 else 'NOT met'})",
    ]
    peer = next((n for n in pkg if n.startswith("peer omnitts-lint cold")), None)
    if peer:
        out += ["", "Interleaved rounds (ast.parse, this checkout, the peer in turn; ratios within the same rounds):"]
        for k in ("package", "models"):
            r = rows[k]
            mine, ref = r["omnitts-lint cold, interleaved"], r["ast.parse, interleaved"]
            out.append(
                f"- {k}: this checkout {mine / ref:.2f}x ast.parse, the peer {r[peer] / ref:.2f}x; "
                f"this checkout / peer = {mine / r[peer]:.2f}x"
            )
    out += [
        "",
        "Tools: " + ", ".join(f"{k}={'missing' if v is None else Path(v).name}" for k, v in tools.items()),
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
