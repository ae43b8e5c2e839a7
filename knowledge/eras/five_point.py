"""Five-point era (0.20-0.22): serving_speech.py dispatches every model itself (stage constant, union,
`_detect_tts_model_type`, `_validate_tts_request`, `_prepare_speech_generation`); lazy pipeline registry."""

from __future__ import annotations

from omnitts.knowledge import layout as L
from omnitts.knowledge.eras import base as B


class FivePoint(B.LazyPipelineRegistry, B.Era):
    name = "five-point"
    title = "five-point"
    releases = "0.20-0.22"
    serving_codemod = ("FivePointServing", "RemoveFivePointServing")
    points = (
        B.PACKAGE,
        B.PROCESSOR,
        B.PIPELINE,
        B.DEPLOY,
        B.REGISTRY,
        B.LAZY_PIPELINE_REGISTRY,
        B.HF_CONFIG,
        B.SERVING_CONSTANT,
        B.SERVING_UNION,
        B.Point("serving.detect", L.SERVING, "_detect_tts_model_type() returns the model type for the stage key"),
        B.Point(
            "serving.validate", L.SERVING, "_validate_tts_request() dispatches the model type (else: Qwen3-TTS rules)"
        ),
        B.Point(
            "serving.build", L.SERVING, "_prepare_speech_generation() builds the model's request (else: Qwen3-TTS path)"
        ),
        B.EXAMPLES,
        B.TESTS,
        B.HUB,
    )

    @classmethod
    def matches(cls, files: B.TreeFiles) -> bool:
        return (
            files.has_deploy
            and not files.has_adapters
            and files.union
            and files.serving_detects
            and bool(files.stage_constants)
            and files.pipeline_registry == "_OMNI_PIPELINES"
        )
