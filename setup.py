"""Maps the repo's top-level folders onto the ``omnitts.*`` namespace (see pyproject.toml)."""

import importlib.util
import sys
from pathlib import Path

from setuptools import find_namespace_packages, setup

ROOTS = ("console", "knowledge", "scaffold", "validators", "reference_models")
DATA = ["*.j2", "*.jinja", "*.json", "*.yaml", "*.yml", "*.md", "*.txt", "*.sh", "*.pt", "*.npz", "*.toml"]

packages: list[str] = []
package_dir: dict[str, str] = {}
for root in ROOTS:
    package_dir[f"omnitts.{root}"] = root
    packages.append(f"omnitts.{root}")
    packages += [f"omnitts.{root}.{sub}" for sub in find_namespace_packages(root, exclude=["*__pycache__*"])]
package_data = {pkg: DATA for pkg in packages}

# templates/ is data, not code: its folders are named like `{{cookiecutter.name}}`, which no package finder
# accepts, so the whole folder ships as data of one package.
package_dir["omnitts.templates"] = "templates"
packages.append("omnitts.templates")
package_data["omnitts.templates"] = ["**/*"]


def _pairing():
    """knowledge/pairing.py, read without importing omnitts (not installed yet while it builds)."""
    spec = importlib.util.spec_from_file_location(
        "_omnitts_pairing", Path(__file__).parent / "knowledge" / "pairing.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


RUNTIME = ["torch>=2.4", "numpy>=1.24", "soundfile>=0.12", "transformers>=4.45"]
extras = {
    # runtime validators and reference models (CPU is enough)
    "runtime": RUNTIME,
    # everything the test suite needs; ruff is pinned per target tree at test time, this one lints omnitts itself
    # pre-commit: tests/static/test_precommit_hooks.py runs the shipped hooks through `pre-commit try-repo`
    "test": [*RUNTIME, "pytest-xdist>=3.5", "pytest-timeout>=2.3", "pre-commit>=3.5"],
}
# the vLLM that goes with each vLLM-Omni release (real-vLLM tier), from the one pairing table:
# pip install 'omnitts[vllm-0-30-0]' for a 0.30.0 tree
_table = _pairing()
for _release in _table.PAIRINGS:
    extras["vllm-" + _release.replace(".", "-")] = [_table.vllm_requirement(_release)]

setup(
    extras_require=extras,
    packages=packages,
    package_dir=package_dir,
    package_data=package_data,
    exclude_package_data={"": ["__pycache__/*", "*.pyc"]},
)
