"""Integration — stage/deploy configs: AR concurrency, single-stage required fields, async-chunk
coherence. Tree scope: a deploy YAML is read together with the pipeline.py it configures."""

from __future__ import annotations

from omnitts.knowledge import configs
from omnitts.validators.static.rule import Invalid, Report, Rule, Valid, register

NEXT_FUNCS = ("async_chunk_process_next_stage_input_func", "custom_process_next_stage_input_func")
SYNC_FUNCS = ("sync_process_input_func", "custom_process_input_func")
PROC_FIELDS = NEXT_FUNCS + SYNC_FUNCS


def _truthy(v) -> bool:
    return v is True or (isinstance(v, str) and v.lower() in ("true", "yes", "1"))


def _views(ctx):
    """(config rel, Config, Pipeline|None, stage kinds by id, is_audio) for configs in focus."""

    def build():
        out = []
        for rel in configs.config_files(ctx):
            cfg = configs.load_config(ctx, rel)
            if cfg is None or not cfg.stages:
                continue
            pipe = None if cfg.legacy else configs.pipeline_for(ctx, rel, cfg)
            if cfg.legacy:
                kinds = {sid: str(st.get("worker_type", "")).lower() for sid, st in cfg.stages.items()}
                audio = any(
                    st.get("final_output_type") == "audio" or st.get("engine_output_type") == "audio"
                    for st in cfg.stages.values()
                )
            elif pipe is not None:
                kinds = {
                    st.stage_id: "ar"
                    if st.get("execution_type") == "LLM_AR"
                    else str(st.get("execution_type", "")).lower()
                    for st in pipe.stages
                }
                audio = any(st.get("final_output_type") == "audio" for st in pipe.stages)
            elif ctx.standalone:
                # A generated TTS package before it is applied to a tree: stage 0 is the AR stage (the
                # only one for single-stage and native-AR models), later stages are decoders.
                kinds = {sid: "ar" if sid == min(cfg.stages) else "generation" for sid in cfg.stages}
                audio = True
            else:
                continue
            out.append((rel, cfg, pipe, kinds, audio))
        return out

    return [v for v in ctx.memo("config_views", build) if ctx.in_focus(v[0]) or (v[2] and ctx.in_focus(v[2].path))]


_REG = {"vllm_omni/__init__.py": "", "vllm_omni/model_executor/models/registry.py": "_OMNI_MODELS = {}\n"}
_PIPE2 = """
from vllm_omni.config.stage_config import PipelineConfig, StageExecutionType, StagePipelineConfig

_PROC = "vllm_omni.model_executor.stage_input_processors.demo_tts"

DEMO_TTS_PIPELINE = PipelineConfig(
    model_type="demo_tts",
    stages=(
        StagePipelineConfig(stage_id=0, model_stage="demo_tts", execution_type=StageExecutionType.LLM_AR,
                            owns_tokenizer=True, engine_output_type="latent",
                            async_chunk_process_next_stage_input_func=f"{_PROC}.talker2code2wav_async_chunk"),
        StagePipelineConfig(stage_id=1, model_stage="demo_tts_code2wav",
                            execution_type=StageExecutionType.LLM_GENERATION, input_sources=(0,),
                            final_output=True, final_output_type="audio", engine_output_type="audio",
                            sync_process_input_func=f"{_PROC}.talker2code2wav"),
    ),
)
"""
_PROC_SRC = "def talker2code2wav(*a):\n    pass\n\n\ndef talker2code2wav_async_chunk(*a):\n    pass\n"
_PIPE1 = """
from vllm_omni.config.stage_config import PipelineConfig, StageExecutionType, StagePipelineConfig

DEMO_TTS_PIPELINE = PipelineConfig(
    model_type="demo_tts",
    stages=(
        StagePipelineConfig(stage_id=0, model_stage="demo_tts", execution_type=StageExecutionType.LLM_AR,
                            final_output=True, final_output_type="audio", owns_tokenizer=True,
                            engine_output_type="audio"),
    ),
)
"""
_DEPLOY2 = """async_chunk: true
connectors:
  shm:
    name: SharedMemoryConnector
stages:
  - stage_id: 0
    max_num_seqs: {seqs}
    output_connectors:
      to_stage_1: {conn}
  - stage_id: 1
    max_num_seqs: 1
    input_connectors:
      from_stage_0: shm
"""


def _two_stage(seqs: int = 8, conn: str = "shm", proc: str = _PROC_SRC) -> dict[str, str]:
    return {
        **_REG,
        "vllm_omni/model_executor/models/demo_tts/pipeline.py": _PIPE2,
        "vllm_omni/model_executor/stage_input_processors/demo_tts.py": proc,
        "vllm_omni/deploy/demo_tts.yaml": _DEPLOY2.format(seqs=seqs, conn=conn),
    }


def _one_stage(deploy: str, pipe: str = _PIPE1) -> dict[str, str]:
    return {
        **_REG,
        "vllm_omni/model_executor/models/demo_tts/pipeline.py": pipe,
        "vllm_omni/deploy/demo_tts.yaml": deploy,
    }


@register
class ArStageConcurrency(Rule):
    """An AR stage of a speech pipeline configured with `max_num_seqs` (legacy: `runtime.max_batch_size`)
    below 4 in a deploy or stage config.

    The stage kind comes from the pipeline.py the deploy YAML configures (`execution_type=LLM_AR`)
    or, for legacy `stage_args` YAMLs, from `worker_type: ar`. Decoder (generation) stages may stay at
    1 on purpose and are not reported.

    Why: the guide's rule (RFC #2568): with one sequence the codec window round-robins across
    requests and concurrent requests hear audio gaps; for single-stage models the AR stage is the
    only stage, so it serializes every request.

    Fix: set `max_num_seqs: 4` or more on the AR stage (stage 0 of a two-stage pipeline, the only
    stage of a single-stage one); if the model truly cannot batch, suppress with the reason
    (`# omnitts: ignore[OMNI-INT-001] process-wide RNG state`).
    """

    id = "OMNI-INT-001"
    name = "ar-stage-concurrency"
    invariant = "INT"
    severity = "error"
    scope = "tree"
    VALID = [Valid(files=_two_stage(seqs=8))]
    INVALID = [Invalid(files=_two_stage(seqs=1), path="vllm_omni/deploy/demo_tts.yaml", line=7, message="below 4")]

    def check_tree(self, ctx):
        for rel, cfg, _pipe, kinds, audio in _views(ctx):
            if not audio:
                continue
            for sid, st in sorted(cfg.stages.items()):
                if kinds.get(sid) != "ar":
                    continue
                for key in ("max_num_seqs", "runtime.max_batch_size"):
                    v = st.get(key)
                    if isinstance(v, int) and not isinstance(v, bool) and v < 4:
                        yield Report(
                            st.line_of(key),
                            1,
                            f"AR stage {sid} sets {key.split('.')[-1]}: {v}, below 4: the codec "
                            "window round-robins across requests and concurrent requests get audio gaps "
                            "(RFC #2568)",
                            path=rel,
                            symbol=f"stages[{sid}].{key}",
                        )


@register
class SingleStageFields(Rule):
    """A single-stage AR speech model whose stage config misses a required field: `worker_type: ar`
    (`execution_type=LLM_AR`), `engine_output_type: audio`, `final_output: true`,
    `final_output_type: audio`, `is_comprehension: true` (`owns_tokenizer=True`), and a top-level
    `async_chunk: false` in its deploy/stage YAML.

    Why: without `engine_output_type: audio` the AR runner never emits multimodal payloads; without
    `is_comprehension`/`owns_tokenizer` no stage owns the tokenizer; 0.20+ deploy configs default
    `async_chunk` to true and the loader raises `ValueError` when no stage has a next-stage
    processor.

    Fix: set the fields as in the guide's single-stage section (pipeline.py for 0.20+, the
    `stage_args` YAML before) and put `async_chunk: false` at the top of the deploy YAML.
    """

    id = "OMNI-INT-002"
    name = "single-stage-fields"
    invariant = "INT"
    severity = "error"
    scope = "tree"
    VALID = [Valid(files=_one_stage("async_chunk: false\nstages:\n  - stage_id: 0\n    max_num_seqs: 4\n"))]
    INVALID = [
        Invalid(
            files=_one_stage("stages:\n  - stage_id: 0\n    max_num_seqs: 4\n"),
            path="vllm_omni/deploy/demo_tts.yaml",
            line=1,
            message="async_chunk: false",
        ),
        Invalid(
            files=_one_stage(
                "async_chunk: false\nstages:\n  - stage_id: 0\n    max_num_seqs: 4\n",
                pipe=_PIPE1.replace('engine_output_type="audio"', 'engine_output_type="latent"'),
            ),
            path="vllm_omni/model_executor/models/demo_tts/pipeline.py",
            line=9,
            message="engine_output_type",
        ),
    ]

    def check_tree(self, ctx):
        reported = set()
        for rel, cfg, pipe, kinds, audio in _views(ctx):
            if not audio or len(kinds) != 1 or "ar" not in kinds.values():
                continue
            if cfg.legacy:
                ((sid, st),) = cfg.stages.items()
                need = {"engine_output_type": "audio", "final_output": True, "is_comprehension": True}
                where, line_of = rel, st.line_of
            elif pipe is None:  # standalone package: the stage fields live in a pipeline.py it does not have yet
                st, need, where, line_of = None, {}, rel, None
            else:
                st = pipe.stages[0]
                need = {
                    "engine_output_type": "audio",
                    "final_output": True,
                    "final_output_type": "audio",
                    "owns_tokenizer": True,
                }
                where, line_of = pipe.path, st.line_of
            for key, want in need.items():
                got = st.get(key)
                ok = _truthy(got) if want is True else got == want
                if not ok and (where, key) not in reported:
                    reported.add((where, key))
                    yield Report(
                        line_of(key) if key in st.fields else st.line,
                        1,
                        f"single-stage AR speech stage needs `{key}: {str(want).lower()}` (has {got!r})",
                        path=where,
                        symbol=f"stages[0].{key}",
                    )
            ac = cfg.top.get("async_chunk")
            if ac is None or _truthy(ac.value):
                yield Report(
                    ac.line if ac else 1,
                    1,
                    "single-stage AR speech config needs a top-level `async_chunk: false`"
                    + ("" if ac else " (absent: 0.20+ deploy configs default to true and the loader raises)"),
                    path=rel,
                    symbol="async_chunk",
                )


@register
class AsyncChunkCoherent(Rule):
    """Async-chunk fields that do not fit together in a multi-stage speech pipeline: `async_chunk`
    on (the 0.20+ default) with no stage declaring a next-stage processor; `async_chunk: false` when
    the consumer stage only has an async-chunk processor; a processor path that names no function
    in the tree; a stage connector name that no `connectors:` entry defines.

    Why: each of these fails only at load or first request (`ValueError` in
    `merge_pipeline_deploy`, an import error in the stage worker, a decoder stage that never
    receives input), far from the file that caused it.

    Fix: keep the pipeline's processors (`async_chunk_process_next_stage_input_func` /
    `sync_process_input_func`) and the deploy's `async_chunk`/`connectors` in step; point processor
    paths at functions that exist.
    """

    id = "OMNI-INT-003"
    name = "async-chunk-coherent"
    invariant = "INT"
    severity = "error"
    scope = "tree"
    VALID = [Valid(files=_two_stage())]
    INVALID = [
        Invalid(files=_two_stage(conn="shm_typo"), path="vllm_omni/deploy/demo_tts.yaml", line=8, message="shm_typo"),
        Invalid(
            files=_two_stage(proc="def talker2code2wav(*a):\n    pass\n"),
            path="vllm_omni/model_executor/models/demo_tts/pipeline.py",
            line=11,
            message="names no function",
        ),
    ]

    def check_tree(self, ctx):
        seen = set()
        for rel, cfg, pipe, kinds, audio in _views(ctx):
            if not audio or len(kinds) < 2:
                continue
            stages = {st.stage_id: st for st in pipe.stages} if pipe else cfg.stages
            path_of = pipe.path if pipe else rel
            ac = cfg.top.get("async_chunk")
            async_on = _truthy(ac.value) if ac is not None else not cfg.legacy
            has_next = any(st.get(f) for st in stages.values() for f in NEXT_FUNCS)
            if async_on and not has_next and (pipe is not None or cfg.legacy):
                yield Report(
                    ac.line if ac else 1,
                    1,
                    "`async_chunk` is on"
                    + ("" if ac else " (default)")
                    + " but no stage declares a next-stage processor; the loader raises ValueError",
                    path=rel,
                    symbol="async_chunk",
                )
            if not async_on and not cfg.legacy:
                for sid, st in stages.items():
                    if st.get("input_sources") and not any(st.get(f) for f in SYNC_FUNCS) and has_next:
                        yield Report(
                            ac.line if ac else 1,
                            1,
                            f"`async_chunk: false` but stage {sid} only has an async-chunk "
                            "processor upstream and no `sync_process_input_func`",
                            path=rel,
                            symbol="async_chunk",
                        )
            for sid, st in stages.items():
                for f in PROC_FIELDS:
                    target = st.get(f)
                    if target and (path_of, f, target) not in seen and not configs.processor_exists(ctx, target):
                        seen.add((path_of, f, target))
                        yield Report(
                            st.line_of(f),
                            1,
                            f"stage {sid} `{f}` = {target!r} names no function in this tree",
                            path=path_of,
                            symbol=f"stages[{sid}].{f}",
                        )
            for sid, st in cfg.stages.items():
                for f in ("output_connectors", "input_connectors"):
                    conns = st.get(f)
                    if isinstance(conns, dict):
                        for edge, name in conns.items():
                            if name not in cfg.connectors:
                                yield Report(
                                    st.line_of(f),
                                    1,
                                    f"stage {sid} {f}.{edge} names connector {name!r}, which "
                                    "no `connectors:` entry defines",
                                    path=rel,
                                    symbol=f"stages[{sid}].{f}",
                                )
