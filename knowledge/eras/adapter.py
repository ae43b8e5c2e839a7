"""Adapter-only era (0.28-0.30): `tts_adapters/__init__.py` detects the model type itself
(`detect_tts_model_type`); serving_speech.py holds no per-model dispatch; eager pipeline registry."""

from __future__ import annotations

from omnitts.knowledge import layout as L
from omnitts.knowledge.eras import base as B


class AdapterOnly(B.EagerPipelineRegistry, B.Era):
    name = "adapter"
    title = "adapter-only"
    releases = "0.28-0.30"
    has_adapters = True
    adapter_detection = True
    points = (
        B.PACKAGE,
        B.PROCESSOR,
        B.PIPELINE,
        B.DEPLOY,
        B.REGISTRY,
        B.EAGER_PIPELINE_REGISTRY,
        B.HF_CONFIG,
        B.ADAPTER,
        B.ADAPTER_IMPORT,
        B.Point(
            "adapter.stage_keys", f"{L.ADAPTERS}/<name>.py", "adapter's stage_keys / model_archs cover the entry stage"
        ),
        B.Point("adapter.detect", L.ADAPTERS_INIT, "detect_tts_model_type(stage, arch) returns the adapter's name"),
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
            and not files.union
            and files.registry_detects
        )
