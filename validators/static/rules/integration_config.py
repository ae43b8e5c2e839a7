"""Integration — stage/deploy configs: AR concurrency, single-stage required fields, async-chunk
coherence. Tree scope: a deploy YAML is read together with the pipeline.py it configures."""

from __future__ import annotations

import ast
from pathlib import Path

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


def _sources(st) -> list[int]:
    src = st.get("input_sources", st.get("engine_input_source"))
    if isinstance(src, int) and not isinstance(src, bool):
        return [src]
    return [s for s in src if isinstance(s, int)] if isinstance(src, (list, tuple)) else []


def _makes_audio(st) -> bool:
    return st.get("final_output_type") == "audio" or st.get("engine_output_type") == "audio"


def talker_stages(stages: dict, kinds: dict[int, str]) -> set[int]:
    """AR stages that produce what an audio stage decodes: the audio stage itself (single-stage) or an
    AR stage that directly feeds a non-diffusion audio stage and does not emit plain text. A thinker
    feeding a talker, or an encoder feeding a DiT, is not the codec window's producer.
    With no topology declared (a standalone package's deploy YAML) every AR stage counts."""
    ar = {sid for sid, k in kinds.items() if k == "ar"}
    if not any(_makes_audio(st) for st in stages.values()):
        return ar
    declared = any(_sources(st) for st in stages.values())
    out = set()
    for sid in ar:
        st = stages.get(sid)
        if st is None:
            continue
        if _makes_audio(st):
            out.add(sid)
            continue
        if st.get("engine_output_type") == "text":
            continue
        for cid, c in stages.items():
            feeds = sid in _sources(c) if declared else cid == sid + 1
            if feeds and _makes_audio(c) and kinds.get(cid) not in ("ar", "diffusion"):
                out.add(sid)
    return out


def _limit_one(test: ast.AST) -> bool:
    """An `if` test that holds whenever more than one sequence is configured: `max_num_seqs != 1`
    (`> 1`, `1 != max_num_seqs`, ...), alone or `and`-ed with conditions on the model's config only
    (an opt-out flag). A condition on a request's data (`seq_token_counts is None and max_num_seqs > 1`)
    is a requirement of batched inputs, not a limit of the model."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        limits = [v for v in test.values if _compare_limit(v)]
        return bool(limits) and all(v in limits or _config_only(v) for v in test.values)
    return _compare_limit(test)


_CONFIG_HELPERS = {"self", "getattr", "hasattr", "bool", "int", "isinstance"}


def _config_only(node: ast.AST) -> bool:
    names = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    attrs = [n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)]
    return any("config" in x for x in names + attrs) and all(n in _CONFIG_HELPERS or "config" in n for n in names)


def _compare_limit(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare) or len(node.ops) != 1:
        return False
    left, right, op = node.left, node.comparators[0], node.ops[0]
    consts = [n.value for n in (left, right) if isinstance(n, ast.Constant) and type(n.value) is int]
    if not consts or not (_is_seqs(left) or _is_seqs(right)):
        return False
    if isinstance(op, ast.NotEq):
        return consts[0] == 1
    if _is_seqs(left):
        return (isinstance(op, ast.Gt) and consts[0] == 1) or (isinstance(op, ast.GtE) and consts[0] == 2)
    return (isinstance(op, ast.Lt) and consts[0] == 1) or (isinstance(op, ast.LtE) and consts[0] == 2)


def _is_seqs(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "max_num_seqs") or (
        isinstance(node, ast.Attribute) and node.attr == "max_num_seqs"
    )


def enforces_single_seq(ctx, model_dir: str) -> bool:
    """The model package refuses to run with more than one sequence: an `if` on `max_num_seqs` against 1
    whose body raises (`if max_num_seqs != 1: raise ValueError(...)`). Such a `max_num_seqs: 1` is a
    deliberate, enforced limit of the model, not a forgotten default."""

    def build():
        for py in sorted((ctx.root / model_dir).glob("*.py")):
            text = ctx.read(ctx.rel(py))
            if "max_num_seqs" not in text:
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.If)
                    and _limit_one(node.test)
                    and any(isinstance(n, ast.Raise) for b in node.body for n in ast.walk(b))
                ):
                    return True
        return False

    return ctx.memo(f"enforces_single_seq:{model_dir}", build)


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


_MODEL_PY = "vllm_omni/model_executor/models/demo_tts/modeling_demo_tts.py"
_ENFORCED = """import logging

logger = logging.getLogger(__name__)


class DemoTTS:
    def __init__(self, vllm_config):
        max_num_seqs = vllm_config.scheduler_config.max_num_seqs
        if max_num_seqs != 1:
            raise ValueError(f"DemoTTS keeps one decoder state: needs max_num_seqs=1, got {max_num_seqs}")
"""
_PIPE3 = """
from vllm_omni.config.stage_config import PipelineConfig, StageExecutionType, StagePipelineConfig

DEMO_OMNI_PIPELINE = PipelineConfig(
    model_type="demo_omni",
    stages=(
        StagePipelineConfig(stage_id=0, model_stage="thinker", execution_type=StageExecutionType.LLM_AR,
                            owns_tokenizer=True, final_output=True, final_output_type="text",
                            engine_output_type="latent"),
        StagePipelineConfig(stage_id=1, model_stage="talker", execution_type=StageExecutionType.LLM_AR,
                            input_sources=(0,), engine_output_type="latent"),
        StagePipelineConfig(stage_id=2, model_stage="code2wav", execution_type=StageExecutionType.LLM_GENERATION,
                            input_sources=(1,), final_output=True, final_output_type="audio",
                            engine_output_type="audio"),
    ),
)
"""
_DEPLOY3 = """async_chunk: false
stages:
  - stage_id: 0
    max_num_seqs: {thinker}
  - stage_id: 1
    max_num_seqs: {talker}
  - stage_id: 2
    max_num_seqs: 1
"""


def _three_stage(thinker: int, talker: int) -> dict[str, str]:
    return {
        **_REG,
        "vllm_omni/model_executor/models/demo_omni/pipeline.py": _PIPE3,
        "vllm_omni/deploy/demo_omni.yaml": _DEPLOY3.format(thinker=thinker, talker=talker),
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
    or, for legacy `stage_args` YAMLs, from `worker_type: ar`. Only the AR stage whose output an audio
    stage decodes (the talker) is reported: a thinker feeding a talker, an AR stage emitting text, or an
    encoder feeding a DiT stage is not the codec window's producer. Decoder (generation) stages are not
    reported: their `max_num_seqs` is each model's choice (the releases' own decoders run from 1 to 64
    at once; docs/profiles.md), nor is a `max_num_seqs: 1` the model package enforces in code
    (`if max_num_seqs != 1: raise ...`): that limit is deliberate, and raising it would break the model.

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
    VALID = [
        Valid(files=_two_stage(seqs=8)),
        # A deliberate limit: the model raises on any other max_num_seqs.
        Valid(files={**_two_stage(seqs=1), _MODEL_PY: _ENFORCED}),
        # ... unless a switch of the model's config lifts it.
        Valid(
            files={
                **_two_stage(seqs=1),
                _MODEL_PY: _ENFORCED.replace(
                    "if max_num_seqs != 1:", 'if max_num_seqs != 1 and not getattr(self.config, "batched", False):'
                ),
            }
        ),
        # The thinker of a thinker -> talker -> code2wav pipeline is not the codec window's producer.
        Valid(files=_three_stage(thinker=1, talker=8)),
    ]
    INVALID = [
        Invalid(files=_two_stage(seqs=1), path="vllm_omni/deploy/demo_tts.yaml", line=7, message="below 4"),
        # Code that reads max_num_seqs without refusing other values does not make 1 deliberate.
        Invalid(
            files={**_two_stage(seqs=1), _MODEL_PY: _ENFORCED.replace("raise ValueError", "logger.warning")},
            path="vllm_omni/deploy/demo_tts.yaml",
            line=7,
            message="AR stage 0",
        ),
        # A check of a request's inputs when batched is not a limit of the model.
        Invalid(
            files={
                **_two_stage(seqs=1),
                _MODEL_PY: _ENFORCED.replace("if max_num_seqs != 1:", "if seq_lens is None and max_num_seqs > 1:"),
            },
            path="vllm_omni/deploy/demo_tts.yaml",
            line=7,
            message="AR stage 0",
        ),
        Invalid(
            files=_three_stage(thinker=8, talker=1), path="vllm_omni/deploy/demo_omni.yaml", line=6, message="stage 1"
        ),
    ]

    def check_tree(self, ctx):
        for rel, cfg, pipe, kinds, audio in _views(ctx):
            if not audio:
                continue
            topology = {st.stage_id: st for st in pipe.stages} if pipe is not None else cfg.stages
            talkers = talker_stages(topology, kinds)
            model_dir = (
                Path(pipe.path).parent.as_posix() if pipe is not None else f"{ctx.dir('models')}/{Path(rel).stem}"
            )
            for sid, st in sorted(cfg.stages.items()):
                if sid not in talkers:
                    continue
                for key in ("max_num_seqs", "runtime.max_batch_size"):
                    v = st.get(key)
                    if isinstance(v, int) and not isinstance(v, bool) and v < 4:
                        if v == 1 and enforces_single_seq(ctx, model_dir):
                            continue  # a deliberate limit the model's own code enforces
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
