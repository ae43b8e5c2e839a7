"""Where things live in a vLLM-Omni tree (paths relative to its root), and what a tree is.

A tree is a source checkout, an sdist or an unpacked wheel: the folder that holds the `vllm_omni`
package. Its version is read from its files (`tree_version`, the only one), never guessed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

PKG = "vllm_omni"
SERVING = f"{PKG}/entrypoints/openai/serving_speech.py"
ADAPTERS = f"{PKG}/entrypoints/openai/tts_adapters"
ADAPTERS_INIT = f"{ADAPTERS}/__init__.py"
ADAPTERS_BASE = f"{ADAPTERS}/base.py"
ADAPTERS_MODULE = "vllm_omni.entrypoints.openai.tts_adapters"
REGISTRY = f"{PKG}/model_executor/models/registry.py"
MODELS = f"{PKG}/model_executor/models"
PROCESSORS = f"{PKG}/model_executor/stage_input_processors"
PIPELINE_REGISTRY = f"{PKG}/config/pipeline_registry.py"
STAGE_CONFIG = f"{PKG}/config/stage_config.py"
DEPLOY = f"{PKG}/deploy"
STAGE_CONFIGS = f"{PKG}/model_executor/stage_configs"
HF_CONFIGS = f"{PKG}/engine/arg_utils.py"
WORKER_V2 = f"{PKG}/worker_v2"
OUTPUTS_PROCESSOR = f"{PKG}/outputs/output_processor.py"
EXAMPLES_OFFLINE = "examples/offline_inference"
EXAMPLES_ONLINE = "examples/online_serving"
TTS_HUB = "text_to_speech"
OFFLINE_HUB = f"{EXAMPLES_OFFLINE}/{TTS_HUB}/README.md"
ONLINE_HUB = f"{EXAMPLES_ONLINE}/{TTS_HUB}/README.md"
# Where each release keeps the engine's output consolidation (read by tree-scope rules).
CONSOLIDATION_FILES = (
    "vllm_omni/engine/output_processor.py",
    OUTPUTS_PROCESSOR,
    "vllm_omni/outputs/mm_outputs.py",
    "vllm_omni/engine/mm_outputs.py",
)


def read_text(path: Path) -> str:
    """A file's text, '' when it does not exist (other OS errors propagate: the caller words them)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _read_quiet(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def tree_version(root: Path) -> str | None:
    """The release a tree is, from its files: sdist PKG-INFO, wheel METADATA, else `vllm_omni/_version.py`
    (a source checkout). None when none says; eras are detected from files, this is for messages and for
    the runner contract."""
    root = Path(root)
    for meta in [root / "PKG-INFO", *sorted(root.glob(f"{PKG}-*.dist-info/METADATA"))]:
        match = re.search(r"^Version:\s*(\S+)", _read_quiet(meta), re.M)
        if match:
            return match.group(1)
    match = re.search(r"__version__\s*=\s*version\s*=\s*['\"]([^'\"]+)['\"]", _read_quiet(root / PKG / "_version.py"))
    return match.group(1) if match else None


def is_vllm_omni_tree(root: Path) -> bool:
    return (Path(root) / PKG / "__init__.py").is_file() and (Path(root) / REGISTRY).is_file()


def find_root(path: Path) -> Path | None:
    """The directory holding the ``vllm_omni`` package that ``path`` belongs to, if any."""
    path = Path(os.path.abspath(path))
    for cand in [path, *path.parents]:
        if (cand / PKG / "__init__.py").is_file():
            return cand
        if cand.name == PKG and (cand / "__init__.py").is_file():
            return cand.parent
    return None


def find_model_root(path: Path) -> Path | None:
    """A standalone model root (scaffold output, reference models): `<root>/models/<name>/` next to
    `<root>/deploy/`, outside any vLLM-Omni tree."""
    path = Path(os.path.abspath(path))
    for cand in [path, *path.parents]:
        if (cand / "models").is_dir() and (cand / "deploy").is_dir() and not (cand / PKG).exists():
            return cand
    return None


# One model's files in a tree (``root`` the tree, ``name`` the model package, ``model_type`` its deploy yaml's stem).
def model_package(root: Path, name: str) -> Path:
    return Path(root) / MODELS / name


def offline_example(root: Path, name: str) -> Path:
    return Path(root) / EXAMPLES_OFFLINE / TTS_HUB / name / "end2end.py"


def deploy_config(root: Path, model_type: str) -> Path:
    return Path(root) / DEPLOY / f"{model_type}.yaml"


def stage_input_processor(root: Path, name: str) -> Path:
    return Path(root) / PROCESSORS / f"{name}.py"
