"""Five-point era (0.20-0.22): serving_speech.py dispatches every model itself (stage constant, union,
`_detect_tts_model_type`, `_validate_tts_request`, `_prepare_speech_generation`); lazy pipeline registry."""

from __future__ import annotations

from omnitts.knowledge.eras import base


class FivePoint(base.LazyPipelineRegistry, base.Era):
    name = "five-point"
    title = "five-point"
    releases = "0.20-0.22"
    serving_codemod = ("FivePointServing", "RemoveFivePointServing")
    points = (
        base.PACKAGE,
        base.PROCESSOR,
        base.PIPELINE,
        base.DEPLOY,
        base.REGISTRY,
        base.LAZY_PIPELINE_REGISTRY,
        base.HF_CONFIG,
        base.SERVING_CONSTANT,
        base.SERVING_UNION,
        *base.SERVING_DISPATCH,
        base.EXAMPLES,
        base.TESTS,
        base.HUB,
    )

    @classmethod
    def matches(cls, files: base.TreeFiles) -> bool:
        return (
            files.has_deploy
            and not files.has_adapters
            and files.union
            and files.serving_detects
            and bool(files.stage_constants)
            and files.pipeline_registry == "_OMNI_PIPELINES"
        )
