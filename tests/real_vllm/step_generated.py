"""Runs inside the real-vLLM venv: import, registries and one forward step of scaffolded models.

Usage: python step_generated.py TREE '{"name": "pattern", ...}'  -> prints one JSON object per model.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path


def step(tree: Path, name: str, pattern: str) -> dict:
    import torch
    from vllm_omni.config.stage_config import _PIPELINE_REGISTRY, load_deploy_config, merge_pipeline_deploy
    from vllm_omni.engine.arg_utils import _register_omni_hf_configs
    from vllm_omni.model_executor.models.output_templates import OmniOutput
    from vllm_omni.model_executor.models.registry import _OMNI_MODELS, OmniModelRegistry

    from omnitts.knowledge.layout import tree_version
    from omnitts.validators.runtime.harness import Harness
    from omnitts.validators.runtime.subject import RequestPlan, RuntimeSubject, StageSpec

    result: dict = {"name": name, "pattern": pattern}
    package = importlib.import_module(f"vllm_omni.model_executor.models.{name}")
    result["package_file"] = package.__file__
    archs = [arch for arch, entry in _OMNI_MODELS.items() if entry[0] == name]
    classes = {arch: OmniModelRegistry._try_load_model_cls(arch) for arch in archs}
    result["resolved"] = {arch: f"{cls.__module__}.{cls.__qualname__}" for arch, cls in classes.items() if cls}

    pipeline = _PIPELINE_REGISTRY[name]
    result["pipeline_stages"] = [stage.model_stage for stage in pipeline.stages]
    deploy = load_deploy_config(tree / "vllm_omni" / "deploy" / f"{name}.yaml")
    # This CPU machine has no vLLM platform; merge the deploy config as the CUDA platform would.
    import functools

    from vllm_omni.config import stage_config

    original = stage_config._apply_platform_overrides
    stage_config._apply_platform_overrides = functools.partial(original, platform="cuda")
    try:
        merged = merge_pipeline_deploy(pipeline, deploy)
    finally:
        stage_config._apply_platform_overrides = original
    result["merged_stages"] = len(merged) if hasattr(merged, "__len__") else str(type(merged))

    from transformers import AutoConfig

    _register_omni_hf_configs()
    config = AutoConfig.for_model(name)
    result["hf_config"] = type(config).__qualname__

    torch.manual_seed(0)
    by_module = {cls.__module__.rsplit(".", 1)[-1]: cls for cls in classes.values()}
    if pattern == "two-stage":
        classes_in_order = [by_module[f"{name}_talker"], by_module[f"{name}_code2wav"]]
        processor = importlib.import_module(f"vllm_omni.model_executor.stage_input_processors.{name}")
    else:
        classes_in_order = [next(iter(classes.values()))]
        processor = None
    last = len(classes_in_order) - 1
    stages = [
        StageSpec(
            stage_id=i,
            model_stage=str(getattr(cls, "model_stage", cls.__name__)),
            execution="ar" if i == 0 else "generation",
            factory=lambda cls=cls: cls(config=config),
            engine_output_type="latent" if i < last else "audio",
            final_output=i == last,
            cls=cls,
            config=config,
        )
        for i, cls in enumerate(classes_in_order)
    ]
    subject = RuntimeSubject(
        name=name,
        pattern=pattern,
        release=tree_version(tree) or "0.20.0",
        stages=stages,
        prompts=[],
        sample_rate=int(config.sample_rate),
        eos_token_id=int(config.eos_token_id),
        async_chunk_fn=getattr(processor, "talker2code2wav_async_chunk", None),
        sync_fn=getattr(processor, "talker2code2wav", None),
        connector_extra={"codec_chunk_frames": 4, "codec_left_context_frames": 2},
    )
    texts = ["hello from real vllm", "second request"]
    plans = [
        RequestPlan(f"req-{i}", list(config.encode_text(t)), {"text": [t]}, max_tokens=512) for i, t in enumerate(texts)
    ]
    engine = Harness(subject, device="cpu")  # the harness: the one runner omnitts steps models with
    final_model = engine.models[-1]
    records = engine.run(plans, "real-vllm step").in_order(plans)
    result["audio_samples"] = [int(torch.as_tensor(r.offline["audio"]).numel()) for r in records]
    result["sr"] = [int(torch.as_tensor(r.offline["sr"]).reshape(-1)[-1]) for r in records]

    # One direct forward step: it must return the real OmniOutput with model_outputs.
    if pattern == "two-stage":
        frames = torch.zeros((3, config.num_code_groups), dtype=torch.long)
        flat = frames.reshape(-1).tolist()
        out = final_model.forward(
            input_ids=torch.tensor(flat),
            positions=torch.arange(len(flat)),
            runtime_additional_information=[{"request_id": "step", "codes": {"audio": [frames]}}],
            seq_token_counts=[len(flat)],
        )
    else:
        info = {"text": ["step"], "global_request_id": ["step-ext"], "request_id": "step-sched"}
        ids = torch.tensor(config.encode_text("step"))
        if getattr(final_model, "has_preprocess", False):
            ids, embeds, _ = final_model.preprocess(input_ids=ids, input_embeds=None, **info)
        out = final_model.forward(
            input_ids=ids, positions=torch.arange(ids.shape[0]), runtime_additional_information=[info]
        )
        if not isinstance(out, OmniOutput) and hasattr(final_model, "make_omni_output"):
            out = final_model.make_omni_output(out, runtime_additional_information=[info])
    result["forward_type"] = f"{type(out).__module__}.{type(out).__qualname__}"
    result["forward_is_real_omni_output"] = type(out) is OmniOutput
    result["forward_keys"] = sorted((out.multimodal_outputs or {}).keys()) if isinstance(out, OmniOutput) else []
    return result


def main() -> None:
    tree = Path(sys.argv[1])
    for name, pattern in json.loads(sys.argv[2]).items():
        try:
            print(json.dumps(step(tree, name, pattern)), flush=True)
        except Exception as exc:  # report per model; the test asserts on it
            import traceback

            print(
                json.dumps({"name": name, "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}),
                flush=True,
            )


if __name__ == "__main__":
    main()
