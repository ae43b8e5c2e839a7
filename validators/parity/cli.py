"""``omnitts-capture``: record what a model's own implementation produces, for the parity checks.

    omnitts-capture --reference qwen-tts --checkpoint DIR --out CAPTURE [--random-checkpoint]
    omnitts-capture --adapter my_adapter.py:MyReference --python /path/to/ref-venv/bin/python --checkpoint DIR ...

``--reference NAME`` (or ``--model`` with the vLLM-Omni model name) takes a recipe of ``omnitts.knowledge.references``:
the reference's environment is built once from PyPI and cached (``validators/parity/refenv.py``) and omnitts's
adapter for it runs there. ``--adapter`` runs a contributor's own adapter in the Python they name (``--python``; by
default the recipe's environment, else this one). The capture itself runs in that Python, in a subprocess, with
this checkout's omnitts on its path through an overlay. docs/parity.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from omnitts.knowledge.references import UnknownReference, reference, reference_for_model, references


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omnitts-capture", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--reference", help=f"a known reference ({', '.join(references())})")
    which.add_argument("--model", help="the vLLM-Omni model whose known reference to run (e.g. qwen3_tts)")
    parser.add_argument("--adapter", help="module:Class or path/to/adapter.py:Class (default: the reference's own)")
    parser.add_argument("--python", type=Path, help="run the adapter in this Python instead of a built environment")
    parser.add_argument("--checkpoint", required=True, type=Path, help="the model directory both sides load")
    parser.add_argument("--out", required=True, type=Path, help="the capture folder to write")
    parser.add_argument("--random-checkpoint", action="store_true", help="first write a tiny random checkpoint there")
    parser.add_argument("--random-seed", type=int, default=0)
    parser.add_argument("--requests", type=Path, help="JSON list of {id, text, params} (default: the fixed set)")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=None, help="sample with this seed (default: greedy)")
    parser.add_argument("--timeout", type=float, default=1800.0)
    return parser


def capture(args: argparse.Namespace, *, log=None) -> Path:
    """Build (or reuse) the environment and run the capture there; the capture folder. Raises ValueError with a
    one-line message on bad input, RuntimeError when the run fails."""
    from omnitts.validators.engine.install import overlay
    from omnitts.validators.parity.refenv import ensure_reference_env, reference_env

    recipe = None
    if args.reference:
        recipe = reference(args.reference)
    elif args.model:
        recipe = reference_for_model(args.model)
        if recipe is None:
            raise ValueError(f"--model {args.model}: omnitts knows no reference for it; pass --adapter and --python")
    adapter = args.adapter or (recipe.adapter if recipe else None)
    if adapter is None:
        raise ValueError("name the reference: --reference NAME, --model NAME, or --adapter SPEC (with --python)")
    if not args.random_checkpoint and not (args.checkpoint / "config.json").is_file():
        raise ValueError(f"--checkpoint {args.checkpoint}: no config.json (or pass --random-checkpoint to write one)")
    python = args.python or (ensure_reference_env(recipe, log=log) if recipe else Path(sys.executable))
    work = Path(tempfile.mkdtemp(prefix="omnitts-capture-"))
    cmd = [
        str(python), "-m", "omnitts.validators.parity.capture", "--adapter", adapter,
        "--checkpoint", str(args.checkpoint.resolve()), "--out", str(args.out.resolve()), "--dtype", args.dtype,
        "--device", args.device, "--random-seed", str(args.random_seed),
    ]  # fmt: skip
    if args.random_checkpoint:
        cmd.append("--random-checkpoint")
    if args.requests:
        cmd += ["--requests", str(args.requests.resolve())]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    env = reference_env(python, overlay(work / "overlay"))
    log_path = work / "capture.log"
    with log_path.open("w") as fh:
        proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=args.timeout)
    if proc.returncode != 0:
        tail = "\n".join(log_path.read_text().strip().splitlines()[-20:])
        raise RuntimeError(f"the capture failed (log {log_path}):\n{tail}")
    return args.out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        out = capture(args)
    except (ValueError, UnknownReference) as exc:
        print(f"omnitts-capture: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the environment build or the run: the message says which step
        print(f"omnitts-capture: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
