"""The reference's own environment: built once from its recipe (``omnitts.knowledge.references``), cached.

``$OMNITTS_CACHE/reference-venv-<name>``: torch (the CPU build, as the engine environment's), then the reference's
packages without their dependency lists (the recipe pins what the reference imports and names what it leaves out
and why), the CUDA-only PyPI builds neutralised the way the engine environment neutralises them, an import check,
and only then a ready marker (an interrupted build is redone, a build from an older recipe is replaced). Built under
a cache lock after a free-space check. omnitts is not installed there: the capture puts the engine overlay (this
checkout's packages) on ``PYTHONPATH``, like the engine tier.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from omnitts.knowledge.references import ReferenceRecipe
from omnitts.knowledge.releases import CacheSpaceError, cache_lock, cache_root, require_free_space
from omnitts.validators.engine import install

READY = ".omnitts-reference-ready.json"


class ReferenceEnvError(RuntimeError):
    """The reference environment could not be built; the message names the step."""


def venv_dir(recipe: ReferenceRecipe) -> Path:
    return cache_root() / f"reference-venv-{recipe.name}"


def _run(step: str, cmd: list[str], log) -> None:
    log(f"[omnitts-capture] {step}: {' '.join(cmd)}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise ReferenceEnvError(f"reference env: {step} failed (exit {proc.returncode}):\n{tail}")


def _ready(venv: Path, recipe: ReferenceRecipe) -> dict | None:
    try:
        info = json.loads((venv / READY).read_text())
    except (OSError, ValueError):
        return None
    return info if info.get("fingerprint") == recipe.fingerprint and (venv / "bin" / "python").exists() else None


def _build(recipe: ReferenceRecipe, venv: Path, log) -> dict:
    started = time.monotonic()
    if venv.exists() and not (venv / "bin" / "python").exists():
        shutil.rmtree(venv)
    if not venv.exists():
        try:
            require_free_space(venv, recipe.disk_gib, f"the reference environment {recipe.name}")
        except CacheSpaceError as exc:
            raise ReferenceEnvError(f"reference env: {exc}") from None
        _run("venv", [sys.executable, "-m", "venv", str(venv)], log)
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run("torch", [*pip, recipe.torch], log)
    # The reference's package without its dependency list (it declares what it never imports, e.g. gradio for a web
    # demo), then what it imports, with their dependencies, torch held at the CPU build by a constraint.
    _run(recipe.package, [*pip, "--no-deps", recipe.package], log)
    constraints = venv / "omnitts-constraints.txt"
    constraints.write_text(recipe.torch + "\n")
    _run(f"{recipe.name}'s requirements", [*pip, "-c", str(constraints), *recipe.requirements], log)
    site = install._site_packages(py)
    hidden = {name: install._hide_c_extensions(site, name) for name in recipe.hide_c_extensions}
    _run("import check", [str(py), "-c", recipe.smoke or "import torch"], log)
    frozen = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout.split()
    return {
        "fingerprint": recipe.fingerprint,
        "name": recipe.name,
        "seconds": round(time.monotonic() - started),
        "hidden": hidden,
        "omitted": recipe.omitted,
        "freeze": frozen,
    }


def ensure_reference_env(recipe: ReferenceRecipe, *, log=None) -> Path:
    """The python of the ready environment of ``recipe``, building it first if needed (parallel-safe)."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    venv = venv_dir(recipe)
    if _ready(venv, recipe):
        return venv / "bin" / "python"
    with cache_lock(f"reference-venv-{recipe.name}"):
        if not _ready(venv, recipe):
            if (venv / READY).exists():
                shutil.rmtree(venv)
            info = _build(recipe, venv, log)
            (venv / READY).write_text(json.dumps(info, indent=1))
            log(f"[omnitts-capture] reference environment ready in {info['seconds']} s: {venv}")
    return venv / "bin" / "python"


def reference_env(python: Path, overlay: Path) -> dict[str, str]:
    """The environment a capture runs under: this checkout's omnitts through the overlay, nothing else of ours."""
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    env["PYTHONPATH"] = str(overlay)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")  # a checkpoint directory, never the hub
    return env
