"""Hybrid era (0.24-0.26): `tts_adapters/` exists, but serving_speech.py still detects the model type
(stage constant, union, `_detect_tts_model_type`); an adapter's stage_keys are documentation; eager
pipeline registry."""

from __future__ import annotations

from omnitts.knowledge import layout
from omnitts.knowledge.eras import base


class Hybrid(base.EagerPipelineRegistry, base.Era):
    name = "hybrid"
    title = "hybrid adapters"
    releases = "0.24-0.26"
    has_adapters = True
    legacy_serving_branches = True
    serving_codemod = ("HybridServing", "RemoveHybridServing")
    points = (
        base.PACKAGE,
        base.PROCESSOR,
        base.PIPELINE,
        base.DEPLOY,
        base.REGISTRY,
        base.EAGER_PIPELINE_REGISTRY,
        base.HF_CONFIG,
        base.SERVING_CONSTANT,
        base.SERVING_UNION,
        base.Point(
            "serving.detect", layout.SERVING, "_detect_tts_model_type() returns the adapter's name for the stage key"
        ),
        base.ADAPTER,
        base.ADAPTER_IMPORT,
        base.Point(
            "adapter.stage_keys",
            f"{layout.ADAPTERS}/<name>.py",
            "adapter's stage_keys name the entry stage key (documentation in 0.24-0.26)",
        ),
        base.EXAMPLES,
        base.TESTS,
        base.HUB,
    )

    @classmethod
    def matches(cls, files: base.TreeFiles) -> bool:
        return (
            files.has_deploy
            and files.has_adapters
            and files.pipeline_registry == "OMNI_PIPELINES"
            and files.union
            and files.serving_detects
            and bool(files.stage_constants)
            and not files.registry_detects
        )
