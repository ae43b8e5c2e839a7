"""Layout profiles: the one place that knows how each vLLM-Omni era lays out a TTS model.

An era is detected from the tree's files (never from a version string): which registries exist, how
`serving_speech.py` dispatches, whether `tts_adapters/` exists. Scaffold and validators both ask
`detect_profile(root)`; see docs/profiles.md for the evidence behind each field.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from omnitts.scaffold.errors import ScaffoldError

PKG = "vllm_omni"
SERVING = f"{PKG}/entrypoints/openai/serving_speech.py"
ADAPTERS = f"{PKG}/entrypoints/openai/tts_adapters"
REGISTRY = f"{PKG}/model_executor/models/registry.py"
PIPELINE_REGISTRY = f"{PKG}/config/pipeline_registry.py"
DEPLOY = f"{PKG}/deploy"
STAGE_CONFIGS = f"{PKG}/model_executor/stage_configs"
HF_CONFIGS = f"{PKG}/engine/arg_utils.py"
OFFLINE_HUB = "examples/offline_inference/text_to_speech/README.md"
ONLINE_HUB = "examples/online_serving/text_to_speech/README.md"


@dataclass(frozen=True)
class LayoutProfile:
    """Where a TTS integration lives in one era, and what that era's runtime really does."""

    era: str
    releases: str
    root: Path
    # Per-request id keys the runner really writes into each request's dict, in lookup order.
    request_id_keys: tuple[str, ...]
    # The engine's output consolidation: (module, qualified name) of the function the validators use.
    consolidation: tuple[str, str]
    evidence: tuple[str, ...] = field(default=())
    version: str | None = None

    def path(self, rel: str) -> Path:
        return self.root / rel

    @property
    def has_sources(self) -> bool:
        """True for a source checkout or sdist (examples/, tests/, pyproject.toml); wheels hold the package only."""
        return (self.root / "pyproject.toml").is_file() and (self.root / "examples").is_dir()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise ScaffoldError(f"cannot read {path}: {exc.strerror}") from exc


def _module_assign_names(source: str) -> set[str]:
    names: set[str] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return names
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def tree_version(root: Path) -> str | None:
    """Release version for messages only (eras are detected from files)."""
    for meta in [root / "PKG-INFO", *sorted(root.glob("vllm_omni-*.dist-info/METADATA"))]:
        match = re.search(r"^Version: (\S+)", _read(meta), re.M)
        if match:
            return match.group(1)
    return None


def is_vllm_omni_tree(root: Path) -> bool:
    return (root / PKG / "__init__.py").is_file() and (root / REGISTRY).is_file()


def detect_profile(root: Path) -> LayoutProfile:
    """Detect the layout era of the vLLM-Omni tree at ``root``; refuse what is not a tree."""
    root = Path(root).resolve()
    if not is_vllm_omni_tree(root):
        raise ScaffoldError(f"{root} is not a vLLM-Omni tree (no {REGISTRY}); pass --target DIR or pypi:vllm-omni==X")
    version = tree_version(root)
    serving = _read(root / SERVING)
    serving_names = _module_assign_names(serving)
    pipeline_names = _module_assign_names(_read(root / PIPELINE_REGISTRY))
    has_adapters = (root / ADAPTERS / "__init__.py").is_file()
    has_deploy = (root / DEPLOY).is_dir()
    five_point = "_TTS_MODEL_STAGES" in serving_names and "def _detect_tts_model_type" in serving
    stage_constants = sorted(n for n in serving_names if re.fullmatch(r"_\w+_MODEL_STAGES", n) and n != "_TTS_MODEL_STAGES")
    evidence = (
        f"serving_speech.py: {'five-point constants ' + str(len(stage_constants)) if five_point else 'no _TTS_MODEL_STAGES union'}",
        f"tts_adapters/: {'present' if has_adapters else 'absent'}",
        f"pipeline registry: {', '.join(sorted(pipeline_names & {'_OMNI_PIPELINES', 'OMNI_PIPELINES'})) or 'absent'}",
        f"deploy/: {'present' if has_deploy else 'absent'}",
    )
    found = "; ".join(evidence)
    if five_point and not has_adapters and "_OMNI_PIPELINES" in pipeline_names and has_deploy:
        return LayoutProfile(
            era="five-point",
            releases="0.20-0.22",
            root=root,
            request_id_keys=("request_id",),
            consolidation=("vllm_omni.engine.output_processor", "OmniRequestState._consolidate_multimodal_tensors"),
            evidence=evidence,
            version=version,
        )
    if has_adapters:
        era = "hybrid adapters (0.24-0.26)" if stage_constants else "adapter-only (0.28-0.30)"
    elif five_point and stage_constants:
        era = "legacy stage_configs (0.18)"
    elif "_TTS_MODEL_STAGES" in serving_names:
        era = "single-model serving (0.14-0.16)"
    elif not serving:
        era = "no /v1/audio/speech serving"
    else:
        era = "unknown"
    raise ScaffoldError(
        f"unsupported vLLM-Omni layout at {root} (version {version or 'unknown'}): looks like the {era} era ({found});"
        " omnitts-scaffold supports the five-point era (0.20-0.22) in this release"
    )
