"""Legacy stage_configs era (0.18): serving_speech.py's five points as in 0.20-0.22, but topology is a
`stage_args:` yaml under `model_executor/stage_configs/<model_type>.yaml` (found by HF model_type, no
registry), and there is neither a pipeline registry nor a deploy dir.

The 0.18 runner writes no per-request id before preprocess(); the only id a model sees is the
orchestrator's `global_request_id` (a one-element list) in the entry stage's additional_information,
so generated models key their per-request state on it (`request_id_keys`).
"""

from __future__ import annotations

from omnitts.knowledge import layout
from omnitts.knowledge.eras import base

STAGE_CONFIG = base.Point(
    "stage_config",
    f"{layout.STAGE_CONFIGS}/<model_type>.yaml",
    "stage_args yaml (topology; file name = HF model_type)",
    generated=True,
)


class LegacyStageConfigs(base.Era):
    name = "legacy"
    title = "legacy stage_configs"
    releases = "0.18"
    pipeline_registry = ""  # none: the engine finds stage_configs/<model_type>.yaml by HF model_type
    serving_codemod = ("FivePointServing", "RemoveFivePointServing")
    stage_args_topology = True
    points = (
        base.PACKAGE,
        base.PROCESSOR,
        STAGE_CONFIG,
        base.REGISTRY,
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
            not files.has_deploy
            and not files.has_adapters
            and files.union
            and files.serving_detects
            and bool(files.stage_constants)
            and files.pipeline_registry is None
        )

    def pipeline_patches(self, key: str, module: str, var: str) -> list[base.PatchSpec]:
        return []  # no pipeline registry in this era

    @staticmethod
    def registered_pipeline(value, imports: dict[str, str]) -> tuple[str, str] | None:
        return None
