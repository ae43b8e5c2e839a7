"""``omnitts-validate``: the runtime validators out of the installed package, from any directory.

Run inside a vLLM-Omni tree, that tree is the default ``--omni-root`` and the results go outside it (the user
cache), so the contributor's checkout gets no stray files. The checks run under pytest with the plugin loaded
by ``-p`` and the checks folder as the only collected path; pytest options not known here pass through.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

PLUGIN = "omnitts.validators.plugin"

EPILOG = """\
examples:
  omnitts-validate --model my_tts                 inside a vLLM-Omni tree: validate its model my_tts
  omnitts-validate --omni-root ~/vllm-omni --model my_tts
  omnitts-validate --model ref_two_stage          a reference model of omnitts
  omnitts-validate --model my_tts -k i4 -x        pytest options (-k, -x, -n N, -v, ...) pass through

Results go to ./omnitts-out, or, inside a vLLM-Omni tree, to $XDG_CACHE_HOME/omnitts/results/<tree>
(~/.cache when unset): one folder per run (<tier>-<time>/: results.json, checklist.md/json, wav/) and
the checklist over every tier's latest run (checklist.md); the paths are printed at the end.
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="omnitts-validate",
        description="Check a TTS model's vLLM-Omni integration (invariants I1-I5, async chunk, CUDA graph) at runtime.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,  # unknown options go to pytest untouched
    )
    p.add_argument("--model", action="append", default=[], metavar="NAME",
                   help="model to validate (repeat or comma-separate): a model of the tree, a reference model, "
                   "a mutant (model@bug), file.py:factory, or 'all'")  # fmt: skip
    p.add_argument("--omni-root", metavar="DIR", help="the vLLM-Omni tree (default: the tree around the current dir)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="device the model runs on (cpu)")
    p.add_argument("--out", metavar="DIR", help="results folder, one folder per run inside (default: see below)")
    p.add_argument("--release", metavar="X.Y.Z", help="target vLLM-Omni release (default: the tree's)")
    p.add_argument("--check-timeout", type=float, default=60.0, metavar="S",
                   help="seconds of model work per scenario before the check fails as a hang (60)")  # fmt: skip
    p.add_argument("--require-real-vllm", action="store_true", help="fail unless the real vLLM-Omni is importable")
    p.add_argument("--list-models", action="store_true", help="print the reference models and mutants, and exit")
    return p


def enclosing_tree(start: Path) -> Path | None:
    """The vLLM-Omni tree (a folder with ``vllm_omni/__init__.py``) that holds ``start``, or None."""
    for folder in (start, *start.parents):
        if (folder / "vllm_omni" / "__init__.py").is_file():
            return folder
    return None


def default_out(omni_root: Path | None, cwd: Path) -> Path:
    """./omnitts-out, unless that lies inside a vLLM-Omni tree: then the user cache, one folder per tree."""
    local = cwd / "omnitts-out"
    if omni_root is None or not local.resolve().is_relative_to(omni_root.resolve()):
        return local
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    tag = hashlib.sha1(str(omni_root.resolve()).encode()).hexdigest()[:8]
    return cache / "omnitts" / "results" / f"{omni_root.resolve().name}-{tag}"


def _is_tree_model(name: str) -> bool:
    return not (name == "all" or name.startswith("ref_") or ":" in name or "@" in name)


def pytest_args(ns: argparse.Namespace, passthrough: list[str], cwd: Path) -> list[str]:
    """The pytest command line for ``ns`` (raises SystemExit with one line on a bad combination)."""
    from omnitts.validators import checks

    checks_dir = Path(checks.__file__).resolve().parent
    models = [n.strip() for raw in ns.model for n in raw.split(",") if n.strip()]
    root = Path(ns.omni_root).resolve() if ns.omni_root else None
    if root is None and models and all(_is_tree_model(n) for n in models):
        root = enclosing_tree(cwd)
    if root is not None and not (root / "vllm_omni").is_dir():
        raise SystemExit(f"omnitts-validate: {root} is not a vLLM-Omni tree (no vllm_omni/ folder)")
    if not models and not ns.list_models:
        where = f" (a model package under {root}/vllm_omni/model_executor/models)" if root else ""
        raise SystemExit(f"omnitts-validate: which model? pass --model NAME{where}; --help for more")
    out = Path(ns.out).resolve() if ns.out else default_out(root or enclosing_tree(cwd), cwd)
    args = [
        "-c", os.devnull,  # no ini file of the tree or of the current dir applies
        "--rootdir", str(cwd),  # test ids relative to the checks folder, not ../../site-packages/... paths
        "--confcutdir", str(checks_dir.parent),  # conftests of folders above the package are not ours
        "--import-mode=importlib",
        "-p", "no:cacheprovider",  # no .pytest_cache in the contributor's tree
        "-p", PLUGIN,
        str(checks_dir),
        "--omnitts-device", ns.device,
        "--omnitts-out", str(out),
        "--omnitts-check-timeout", str(ns.check_timeout),
    ]  # fmt: skip
    args += [a for n in models for a in ("--omnitts-model", n)]
    if root is not None:
        args += ["--omnitts-omni-root", str(root)]
    if ns.release:
        args += ["--omnitts-release", ns.release]
    if ns.require_real_vllm:
        args.append("--omnitts-require-real-vllm")
    if ns.list_models:
        args.append("--omnitts-list-models")
    return args + passthrough


def main(argv: list[str] | None = None) -> int:
    ns, passthrough = _parser().parse_known_args(sys.argv[1:] if argv is None else argv)
    if passthrough[:1] == ["--"]:
        passthrough = passthrough[1:]
    try:
        args = pytest_args(ns, passthrough, Path.cwd())
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    import pytest

    return int(pytest.main(args))


if __name__ == "__main__":
    sys.exit(main())
