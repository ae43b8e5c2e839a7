"""Lint time per MB of one file, from 100 KB to 5 MB: omnitts-lint must stay linear in file size.

For each file shape and size, one generated Python file is linted in a fresh process with every rule
(`omnitts.validators.static.linter.lint_source`, the per-file path the CLI takes, no cache), and the
peer, a bare `ast.parse` of the same bytes, is timed in the same process right before. Reported: CPU
seconds (the shared development box is often loaded; wall time is printed too), seconds per MB, the
ratio lint / ast.parse, and the growth of seconds-per-MB from the smallest to the largest size (1.0 =
perfectly linear). A CLI run on the largest file of each shape checks the end-to-end time.

Shapes (each the worst case of a part that used to be super-linear):
- ``models``: real vLLM-Omni 0.30.0 model files (talkers, code predictors) concatenated with renamed
  classes: what a big generated or vendored model file looks like;
- ``one-function``: a single `forward` with thousands of loops and distinct variables (the kind
  walker copied its whole environment per branch: 48 s for 400 KB);
- ``many-findings``: thousands of small models, each with a host sync in a hot loop (every finding
  scanned the module for its enclosing statement and symbol: 22 s for 800 KB);
- ``call-chain``: one module whose per-step methods call each other in a chain;
- ``long-statements``: hot loops whose statements are 500-term sums of host syncs (every finding
  dumped its whole statement for the baseline fingerprint: 22 s for one 1,000-term statement).

    python benchmarks/lint_scaling.py                         # 0.1, 0.5, 1, 2, 5 MB
    python benchmarks/lint_scaling.py --sizes 0.1,1 --shapes one-function
    python benchmarks/lint_scaling.py --out benchmarks/results/lint_scaling.md

Target: for every shape, seconds per MB at 5 MB <= 2x seconds per MB at 100 KB (linear within
noise), and the 5 MB file linted by the CLI in seconds (< 30 s on 2 loaded cores).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL_FILES = (
    "qwen3_tts/qwen3_tts_talker.py",
    "voxcpm2/voxcpm2_talker.py",
    "fish_speech/fish_speech_slow_ar.py",
    "qwen3_tts/qwen3_tts_code_predictor_vllm.py",
)

_BAD = """
class M{k}(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        out = []
        for i in range(4):
            out.append(x[i].item())
        return self.helper{k}(out)

    def helper{k}(self, out):
        return out
"""
_CHAIN = """
    def step{k}(self, x):
        y = torch.zeros(4)
        for i in range(2):
            if i % 2:
                y = y + x
            else:
                y = y - x
        return self.step{k1}(y)
"""


def _models(size: int, tree: Path | None) -> str:
    if tree is None:
        raise SystemExit("the `models` shape needs the vllm-omni 0.30.0 tree (--tree or the PyPI cache)")
    base = tree / "vllm_omni" / "model_executor" / "models"
    srcs = [(base / f).read_text(encoding="utf-8") for f in MODEL_FILES if (base / f).is_file()]
    parts, total, k = [], 0, 0
    while total < size:
        src = "\n".join(line for line in srcs[k % len(srcs)].splitlines() if not line.startswith("from __future__"))
        names = sorted(set(re.findall(r"^(?:class|def) (\w+)", src, re.M)), key=len, reverse=True)
        if names:
            src = re.sub(r"\b(" + "|".join(map(re.escape, names)) + r")\b", rf"\1_{k}", src)
        parts.append(src)
        total += len(src) + 2
        k += 1
    return "\n\n".join(parts) + "\n"


def _repeat(head: str, unit, tail: str, size: int) -> str:
    out, n, k = [head], len(head), 0
    while n < size:
        s = unit(k)
        out.append(s)
        n += len(s)
        k += 1
    out.append(tail.format(k=k))
    return "".join(out)


def build(shape: str, size: int, tree: Path | None) -> str:
    if shape == "models":
        return _models(size, tree)
    if shape == "one-function":
        return _repeat(
            "import torch\n\n\nclass Big(torch.nn.Module):\n    def forward(self, x):\n        out = []\n",
            lambda k: (
                f"        for i{k} in range(3):\n            v{k} = x[i{k}].sum() + {k}\n            out.append(v{k})\n"
            ),
            "        return out\n",
            size,
        )
    if shape == "many-findings":
        return _repeat("import torch\n", lambda k: _BAD.format(k=k), "", size)
    if shape == "call-chain":
        return _repeat(
            "import torch\n\n\nclass Big(torch.nn.Module):\n    def forward(self, x):\n        return self.step0(x)\n",
            lambda k: _CHAIN.format(k=k, k1=k + 1),
            "\n    def step{k}(self, x):\n        return x\n",
            size,
        )
    if shape == "long-statements":
        term = "+".join(["x[i].item()"] * 500)
        return _repeat(
            "import torch\n",
            lambda k: (
                f"\n\nclass L{k}(torch.nn.Module):\n    def forward(self, x):\n        for i in range(3):\n"
                f"            y = {term}\n        return y\n"
            ),
            "",
            size,
        )
    raise SystemExit(f"unknown shape {shape}")


# Runs in a fresh interpreter per measurement: parse peer first, then the lint, CPU and wall time.
_MEASURE = r"""
import ast, json, sys, time
from omnitts.validators.static import linter
from omnitts.knowledge.treefacts import TreeFacts
path = sys.argv[1]
data = open(path, "rb").read()
rules = linter.select_rules(None)
c0, w0 = time.process_time(), time.perf_counter()
ast.parse(data)
c1, w1 = time.process_time(), time.perf_counter()
found, _ = linter.lint_source(path, "vllm_omni/model_executor/models/big/big.py", data, TreeFacts(), rules)
c2, w2 = time.process_time(), time.perf_counter()
crash = [f.message for f in found if f.rule in ("OMNI-META-001", "OMNI-META-004")]
print(json.dumps({"parse_cpu": c1 - c0, "parse_wall": w1 - w0, "lint_cpu": c2 - c1, "lint_wall": w2 - w1,
                  "findings": len(found), "crash": crash}))
"""


def measure(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"measuring {path} failed: {proc.stderr.strip()[-800:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cli_time(path: Path) -> tuple[float, float, int]:
    """Wall and CPU seconds of the real CLI on one file (fresh process, no cache), and its exit code."""
    before = os.times()
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "omnitts.validators.static.cli", str(path), "--no-cache", "--no-baseline", "-j", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"omnitts-lint exited {proc.returncode} on {path}: {proc.stderr.strip()[-800:]}")
    return wall, cpu, proc.returncode


def resolve_tree(arg: str | None) -> Path | None:
    if arg:
        return Path(arg)
    os.environ.setdefault("OMNITTS_CACHE", str(REPO / ".cache"))
    try:
        from omnitts.knowledge import releases

        return releases.pristine_tree("0.30.0")
    except Exception as exc:  # reported; the other shapes still run
        print(f"no vllm-omni 0.30.0 tree ({exc}); skipping the `models` shape", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0.1,0.5,1,2,5", help="MB, comma-separated")
    ap.add_argument("--shapes", default="models,one-function,many-findings,call-chain,long-statements")
    ap.add_argument("--tree", help="an extracted vllm-omni 0.30.0 (default: the PyPI cache)")
    ap.add_argument("--no-cli", action="store_true", help="skip the end-to-end CLI run on the largest file")
    ap.add_argument("--out", help="write a markdown report here")
    args = ap.parse_args(argv)
    sizes = [float(s) for s in args.sizes.split(",")]
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    tree = resolve_tree(args.tree) if "models" in shapes else None
    if tree is None and "models" in shapes:
        shapes.remove("models")

    rows = []
    cli = {}
    with tempfile.TemporaryDirectory(prefix="omnitts-lint-scaling-") as tmp:
        for shape in shapes:
            for mb in sizes:
                path = Path(tmp) / f"{shape}-{mb}.py"
                path.write_text(build(shape, int(mb * 1_000_000), tree), encoding="utf-8")
                real_mb = path.stat().st_size / 1e6
                m = measure(path)
                rows.append({"shape": shape, "mb": real_mb, **m})
                per_mb = m["lint_cpu"] / real_mb
                print(
                    f"{shape:14} {real_mb:5.2f} MB  lint {m['lint_cpu']:6.2f} s cpu ({per_mb:5.2f} s/MB)"
                    f"  ast.parse {m['parse_cpu']:5.2f} s  ratio {m['lint_cpu'] / max(m['parse_cpu'], 1e-9):5.2f}x"
                    f"  findings {m['findings']}" + (f"  CRASH {m['crash']}" if m["crash"] else ""),
                    file=sys.stderr,
                )
            if not args.no_cli:
                cli[shape] = cli_time(Path(tmp) / f"{shape}-{sizes[-1]}.py")
                print(
                    f"{shape:14} CLI on the largest file: {cli[shape][0]:.2f} s wall, {cli[shape][1]:.2f} s cpu",
                    file=sys.stderr,
                )

    report, ok = render(rows, cli, shapes, sizes)
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
    print(json.dumps({"targets_met": ok}), file=sys.stderr)
    return 0


def render(rows: list[dict], cli: dict, shapes: list[str], sizes: list[float]) -> tuple[str, bool]:
    out = [
        "# Lint time per MB of one file (omnitts-lint vs. ast.parse, same process)",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {len(os.sched_getaffinity(0))} of "
        f"{os.cpu_count()} CPUs usable, load average {os.getloadavg()[0]:.1f}. CPU seconds of the process (the "
        "box is shared); ratio = lint / bare `ast.parse` of the same bytes, measured right before it.",
        "",
        "| shape | size | lint (cpu) | lint s/MB | ast.parse (cpu) | ratio | lint (wall) | findings |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ok = True
    growth = {}
    for r in rows:
        out.append(
            f"| {r['shape']} | {r['mb']:.2f} MB | {r['lint_cpu']:.2f} s | {r['lint_cpu'] / r['mb']:.2f} | "
            f"{r['parse_cpu']:.2f} s | {r['lint_cpu'] / max(r['parse_cpu'], 1e-9):.2f}x | {r['lint_wall']:.2f} s | "
            f"{r['findings']} |"
        )
        if r["crash"]:
            ok = False
    out += ["", "| shape | s/MB at smallest | s/MB at largest | growth (1.0 = linear) | CLI on largest (wall / cpu) |"]
    out += ["|---|---|---|---|---|"]
    for shape in shapes:
        mine = [r for r in rows if r["shape"] == shape]
        if not mine:
            continue
        first, last = mine[0], mine[-1]
        per_first, per_last = first["lint_cpu"] / first["mb"], last["lint_cpu"] / last["mb"]
        g = per_last / max(per_first, 1e-9)
        growth[shape] = g
        c = cli.get(shape)
        cli_s = f"{c[0]:.2f} s / {c[1]:.2f} s (exit {c[2]})" if c else "not run"
        out.append(f"| {shape} | {per_first:.2f} | {per_last:.2f} | {g:.2f} | {cli_s} |")
        if g > 2.0 or (c and c[1] > 30):
            ok = False
    out += [
        "",
        f"Target: growth <= 2.0 for every shape (linear within noise) and the {sizes[-1]:g} MB file through the CLI "
        f"in < 30 s cpu: {'met' if ok else 'NOT met'}.",
    ]
    return "\n".join(out) + "\n", ok


if __name__ == "__main__":
    raise SystemExit(main())
