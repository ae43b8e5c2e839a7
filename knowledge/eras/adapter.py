"""Adapter-only era (0.28-0.30): `tts_adapters/__init__.py` detects the model type itself
(`detect_tts_model_type`); serving_speech.py holds no per-model dispatch; eager pipeline registry."""

from __future__ import annotations

from omnitts.knowledge import layout
from omnitts.knowledge.eras import base


class AdapterOnly(base.EagerPipelineRegistry, base.Era):
    name = "adapter"
    title = "adapter-only"
    releases = "0.28-0.30"
    has_adapters = True
    adapter_detection = True
    points = (
        base.PACKAGE,
        base.PROCESSOR,
        base.PIPELINE,
        base.DEPLOY,
        base.REGISTRY,
        base.EAGER_PIPELINE_REGISTRY,
        base.HF_CONFIG,
        base.ADAPTER,
        base.ADAPTER_IMPORT,
        base.Point(
            "adapter.stage_keys",
            f"{layout.ADAPTERS}/<name>.py",
            "adapter's stage_keys / model_archs cover the entry stage",
        ),
        base.Point(
            "adapter.detect", layout.ADAPTERS_INIT, "detect_tts_model_type(stage, arch) returns the adapter's name"
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
            and not files.union
            and files.registry_detects
        )
