"""The reference's own environment: built once from its recipe (``omnitts.knowledge.references``), cached.

``$OMNITTS_CACHE/reference-venv-<name>``: torch (the CPU build, as the engine environment's), then the reference's
packages without their dependency lists (the recipe pins what the reference imports and names what it leaves out
and why), the CUDA-only PyPI builds neutralised the way the engine environment neutralises them, an import check,
and only then a ready marker (an interrupted build is redone, a build from an older recipe is replaced). Built under
a cache lock after a free-space check. omnitts is not installed there: the capture puts the engine overlay (this
checkout's packages) on ``PYTHONPATH``, like the engine tier.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from omnitts.knowledge.references import ReferenceRecipe
from omnitts.knowledge.releases import cache_root
from omnitts.validators.engine.venvs import CachedVenv, hide_c_extensions, site_packages

READY = ".omnitts-reference-ready.json"


class ReferenceEnvError(RuntimeError):
    """The reference environment could not be built; the message names the step."""


def venv_dir(recipe: ReferenceRecipe) -> Path:
    return cache_root() / f"reference-venv-{recipe.name}"


def _venv(recipe: ReferenceRecipe) -> CachedVenv:
    return CachedVenv(
        venv_dir(recipe),
        READY,
        recipe.fingerprint,
        tag="[omnitts-capture]",
        what="reference env",
        error=ReferenceEnvError,
    )


def _build(recipe: ReferenceRecipe, cv: CachedVenv, log) -> dict:
    started = time.monotonic()
    cv.create(recipe.disk_gib, f"the reference environment {recipe.name}", log)
    pip = cv.pip
    cv.run("torch", [*pip, recipe.torch], log)
    # The reference's package without its dependency list (it declares what it never imports, e.g. gradio for a web
    # demo), then what it imports, with their dependencies, torch held at the CPU build by a constraint.
    cv.run(recipe.package, [*pip, "--no-deps", recipe.package], log)
    constraints = cv.path / "omnitts-constraints.txt"
    constraints.write_text(recipe.torch + "\n")
    cv.run(f"{recipe.name}'s requirements", [*pip, "-c", str(constraints), *recipe.requirements], log)
    site = site_packages(cv.python)
    hidden = {name: hide_c_extensions(site, name) for name in recipe.hide_c_extensions}
    cv.run("import check", [str(cv.python), "-c", recipe.smoke or "import torch"], log)
    return {
        "fingerprint": recipe.fingerprint,
        "name": recipe.name,
        "seconds": round(time.monotonic() - started),
        "hidden": hidden,
        "omitted": recipe.omitted,
        "freeze": cv.freeze(),
    }


def ensure_reference_env(recipe: ReferenceRecipe, *, log=None) -> Path:
    """The python of the ready environment of ``recipe``, building it first if needed (parallel-safe)."""
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    cv = _venv(recipe)
    if cv.ready() is None:
        cv.ensure(lambda: _build(recipe, cv, log), log, "reference environment ready")
    return cv.python


def reference_env(python: Path, overlay: Path) -> dict[str, str]:
    """The environment a capture runs under: this checkout's omnitts through the overlay, nothing else of ours."""
    env = dict(os.environ)
    env.pop("PYTHONHOME", None)
    env["PYTHONPATH"] = str(overlay)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")  # a checkpoint directory, never the hub
    return env
