"""The layout eras of vLLM-Omni, and `detect_profile`: which era a tree is, read from its files.

`ERAS` lists one object per era (one module each); `LayoutProfile` is an era bound to one tree, with the
per-tree facts its templates need. Nothing outside this package compares eras: callers read the era's
points, flags and patches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from omnitts.knowledge import layout
from omnitts.knowledge.eras.adapter import AdapterOnly
from omnitts.knowledge.eras.base import Era, Integration, PatchSpec, Point, class_fields, read_tree_files
from omnitts.knowledge.eras.five_point import FivePoint
from omnitts.knowledge.eras.hybrid import Hybrid
from omnitts.knowledge.eras.legacy import LegacyStageConfigs
from omnitts.knowledge.errors import TreeError
from omnitts.knowledge.runner import contract_for, preprocess_id_keys

ERAS: tuple[Era, ...] = (LegacyStageConfigs(), FivePoint(), Hybrid(), AdapterOnly())
_NAMED = [f"{e.title} ({e.releases})" for e in ERAS]
SUPPORTED = (
    f"{', '.join(_NAMED[:-1])} and {_NAMED[-1]}"  # "legacy stage_configs (0.18), ... and adapter-only (0.28-0.30)"
)

__all__ = [
    "ADAPTER",
    "ERAS",
    "FIVE_POINT",
    "HYBRID",
    "LEGACY",
    "Era",
    "Integration",
    "LayoutProfile",
    "PatchSpec",
    "Point",
    "detect_profile",
]


@dataclass(frozen=True)
class LayoutProfile:
    """One tree: its era, and the facts read from its files that generated code depends on."""

    era: Era
    root: Path
    version: str | None
    # Per-request id keys the runner writes into each request's dict before preprocess(), in lookup order.
    request_id_keys: tuple[str, ...]
    # PipelineConfig has `default_deploy_config_name` (0.26+): stage construction loads that yaml.
    deploy_name_field: bool
    # tts_adapters/base.py declares max_new_tokens_min / max_new_tokens_max (0.26+).
    adapter_token_bounds: bool
    # serving_speech._resolve_ref_audio returns (wav, sr, cache_key) (0.28+) instead of (wav, sr).
    ref_audio_cache_key: bool
    # Omni.generate() yields OmniRequestOutput subclassing vLLM's RequestOutput (0.28+: `.outputs` on it) rather
    # than a wrapper whose `.request_output` holds the RequestOutput.
    flat_request_output: bool = False
    # The keyword chunk_transfer_adapter passes the step's payload under to the async-chunk stage input processor
    # (`pooling_output` to 0.22, `multimodal_output` from 0.24), read from the adapter's call.
    chunk_payload_kwarg: str = "pooling_output"
    # The async-chunk stage input processor returns an OmniPayloadStruct (0.22+) rather than a dict (to 0.20), read
    # from the adapter's annotation of the processor.
    chunk_payload_struct: bool = False

    @property
    def points(self) -> tuple[Point, ...]:
        return self.era.points

    # The era's flags, read through the profile (callers hold a profile, not an era).
    @property
    def has_adapters(self) -> bool:
        return self.era.has_adapters

    @property
    def adapter_detection(self) -> bool:
        return self.era.adapter_detection

    @property
    def pipeline_registry(self) -> str:
        return self.era.pipeline_registry

    @property
    def has_sources(self) -> bool:
        """True for a source checkout or sdist (examples/, tests/, pyproject.toml); wheels hold the package only."""
        return (self.root / "pyproject.toml").is_file() and (self.root / "examples").is_dir()

    @property
    def serving_points(self) -> tuple[str, ...]:
        return self.era.serving_points

    def point(self, point_id: str) -> Point | None:
        return self.era.point(point_id)


def _refusal(files, version: str | None) -> str:
    """Why a tree matches no supported era, naming the era it looks like."""
    if files.union and not files.stage_constants:
        era = "single-model serving (0.14-0.16)"
        why = "/v1/audio/speech serves Qwen3-TTS only (_TTS_MODEL_STAGES = {'qwen3_tts'}, no per-model dispatch)"
    elif not files.serving:
        era = "no /v1/audio/speech serving"
        why = "there is no serving_speech.py"
    else:
        era = "unknown"
        why = "its files match none of the known eras"
    return (
        f"unsupported vLLM-Omni layout at {files.root} (version {version or 'unknown'}): looks like the {era} era"
        f" ({files.evidence()}); omnitts-scaffold supports the {SUPPORTED} eras: {why}"
    )


def _flat_request_output(root: Path) -> bool:
    """True where the release's OmniRequestOutput is itself a vLLM RequestOutput (read from its class bases)."""
    for rel in (f"{layout.PKG}/outputs/__init__.py", f"{layout.PKG}/outputs.py"):
        source = layout.read_text(root / rel)
        if source:
            return re.search(r"^class OmniRequestOutput\((\w+\.)?RequestOutput\)", source, re.M) is not None
    return False


def detect_profile(root: Path) -> LayoutProfile:
    """Detect the layout era of the vLLM-Omni tree at ``root``; refuse what is not a tree or not supported."""
    root = Path(root).resolve()
    if not layout.is_vllm_omni_tree(root):
        raise TreeError(
            f"{root} is not a vLLM-Omni tree (no {layout.REGISTRY}); pass --target DIR or pypi:vllm-omni==X"
        )
    try:
        files = read_tree_files(root)
    except OSError as exc:
        raise TreeError(f"cannot read {exc.filename}: {exc.strerror}") from exc
    version = layout.tree_version(root)
    era = next((e for e in ERAS if e.matches(files)), None)
    if era is None:
        raise TreeError(_refusal(files, version))
    contract = contract_for(root)
    return LayoutProfile(
        era=era,
        root=root,
        version=version,
        request_id_keys=preprocess_id_keys(root),
        deploy_name_field="default_deploy_config_name"
        in class_fields(layout.read_text(root / layout.STAGE_CONFIG), "PipelineConfig"),
        adapter_token_bounds="max_new_tokens_max" in class_fields(files.adapter_base, "TTSModelAdapter"),
        ref_audio_cache_key=bool(
            re.search(r"def _resolve_ref_audio\(self[^)]*\)\s*->\s*tuple\[.*,\s*str\]:", files.serving)
        ),
        flat_request_output=_flat_request_output(root),
        # the runner contract of this tree (its files over the release table): the harness reads the same
        chunk_payload_kwarg=contract.chunk_payload_kwarg,
        chunk_payload_struct=contract.chunk_payload_struct,
    )


# The era objects by name, for tests and for branches that compare a profile's era with one of them.
LEGACY, FIVE_POINT, HYBRID, ADAPTER = ERAS
