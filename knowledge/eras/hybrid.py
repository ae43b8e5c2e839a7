"""Hybrid era (0.24-0.26): `tts_adapters/` exists, but serving_speech.py still detects the model type
(stage constant, union, `_detect_tts_model_type`); an adapter's stage_keys are documentation; eager
pipeline registry."""

from __future__ import annotations

from omnitts.knowledge import layout as L
from omnitts.knowledge.eras import base as B


class Hybrid(B.EagerPipelineRegistry, B.Era):
    name = "hybrid"
    title = "hybrid adapters"
    releases = "0.24-0.26"
    has_adapters = True
    legacy_serving_branches = True
    serving_codemod = ("HybridServing", "RemoveHybridServing")
    points = (
        B.PACKAGE,
        B.PROCESSOR,
        B.PIPELINE,
        B.DEPLOY,
        B.REGISTRY,
        B.EAGER_PIPELINE_REGISTRY,
        B.HF_CONFIG,
        B.SERVING_CONSTANT,
        B.SERVING_UNION,
        B.Point("serving.detect", L.SERVING, "_detect_tts_model_type() returns the adapter's name for the stage key"),
        B.ADAPTER,
        B.ADAPTER_IMPORT,
        B.Point(
            "adapter.stage_keys",
            f"{L.ADAPTERS}/<name>.py",
            "adapter's stage_keys name the entry stage key (documentation in 0.24-0.26)",
        ),
        B.EXAMPLES,
        B.TESTS,
        B.HUB,
    )

    @classmethod
    def matches(cls, files: B.TreeFiles) -> bool:
        return (
            files.has_deploy
            and files.has_adapters
            and files.pipeline_registry == "OMNI_PIPELINES"
            and files.union
            and files.serving_detects
            and bool(files.stage_constants)
            and not files.registry_detects
        )
