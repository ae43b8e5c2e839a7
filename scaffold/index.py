"""A read-only index of a vLLM-Omni tree's TTS integrations, read with `ast` (nothing is imported).

`check`, `remove` and `new --like` ask it which files and shared-file entries make up one model:
registry entries, pipelines (`models/*/pipeline.py`), pipeline-registry entries, deploy yamls, HF
config registrations, serving constants and detection (0.20-0.26), adapters (0.24+).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import yaml

from omnitts.knowledge import layout
from omnitts.knowledge.detection import compile_adapter_registry, compile_detector, read_adapter_sources
from omnitts.knowledge.eras import LayoutProfile
from omnitts.scaffold.codemods.hf_config import registered_configs
from omnitts.scaffold.codemods.imports import tuple_names
from omnitts.scaffold.codemods.registry import registered
from omnitts.scaffold.codemods.serving import UNION, existing_stage_keys

PIPELINE_MODULE = "vllm_omni.model_executor.models.{}.pipeline"


@dataclass(frozen=True)
class Stage:
    stage_id: int | None
    model_stage: str | None
    model_arch: str | None
    final_output_type: str | None
    processors: tuple[str, ...]  # "module.function" strings the stage names
    execution_type: str | None = None  # LLM_AR / LLM_GENERATION / DIFFUSION


@dataclass(frozen=True)
class Pipeline:
    folder: str  # models/<folder>/pipeline.py
    var: str
    model_type: str | None
    model_arch: str | None
    deploy_name: str | None  # default_deploy_config_name
    stages: tuple[Stage, ...]
    line: int
    legacy: str | None = None  # stage_configs/<x>.yaml (stage_args schema) instead of pipeline.py

    @property
    def where(self) -> str:
        return self.legacy or f"{self.folder}/pipeline.py:{self.var}"

    @property
    def diffusion(self) -> bool:
        return bool(self.stages) and all(s.execution_type == "DIFFUSION" for s in self.stages)

    def arch_of(self, stage: Stage) -> str | None:
        return stage.model_arch or self.model_arch

    @property
    def archs(self) -> list[str]:
        out = [self.model_arch] if self.model_arch else []
        out += [s.model_arch for s in self.stages if s.model_arch]
        return list(dict.fromkeys(out))

    @property
    def audio_only(self) -> bool:
        finals = [s.final_output_type for s in self.stages if s.final_output_type]
        return bool(finals) and set(finals) <= {"audio"}


class _Eval:
    """A tiny evaluator for the literal keyword values of PipelineConfig(...) calls."""

    def __init__(self, constants: dict):
        self.constants = constants

    def __call__(self, node: ast.AST):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.constants.get(node.id)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                value = self(v.value) if isinstance(v, ast.FormattedValue) else v.value
                if value is None:
                    return None
                parts.append(str(value))
            return "".join(parts)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self(e) for e in node.elts)
        if isinstance(node, ast.Attribute):
            return node.attr
        return None


def parse_legacy_stage_config(rel: str, text: str, registry: dict) -> Pipeline | None:
    """A `stage_configs/<x>.yaml` (`stage_args:` schema, the topology before pipeline.py) as a Pipeline."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("stage_args"), list):
        return None
    stages = []
    for raw in data["stage_args"]:
        if not isinstance(raw, dict):
            continue
        engine = raw.get("engine_args") or {}
        processors = tuple(
            v
            for k, v in [*engine.items(), *raw.items()]
            if isinstance(k, str) and k.endswith("_func") and isinstance(v, str)
        )
        stages.append(
            Stage(
                stage_id=raw.get("stage_id"),
                model_stage=engine.get("model_stage"),
                model_arch=engine.get("model_arch"),
                final_output_type=raw.get("final_output_type"),
                processors=processors,
                execution_type="DIFFUSION" if raw.get("stage_type") == "diffusion" else "LLM",
            )
        )
    arch = next((s.model_arch for s in stages if s.model_arch), None)
    folder = registry.get(arch, (None,))[0] if arch else None
    stem = rel.rsplit("/", 1)[-1].removesuffix(".yaml")
    return Pipeline(
        folder=folder or stem,
        var=stem,
        model_type=stem,
        model_arch=None,
        deploy_name=None,
        stages=tuple(stages),
        line=1,
        legacy=rel,
    )


def parse_pipelines(folder: str, source: str) -> list[Pipeline]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    constants: dict = {}
    evaluate = _Eval(constants)
    out = []
    for node in tree.body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        value = node.value
        if isinstance(value, ast.Call) and getattr(value.func, "id", None) == "PipelineConfig":
            kw = {k.arg: k.value for k in value.keywords if k.arg}
            stages = []
            for call in ast.walk(kw.get("stages", ast.Tuple(elts=[]))):
                if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "StagePipelineConfig":
                    skw = {k.arg: k.value for k in call.keywords if k.arg}
                    processors = tuple(
                        v for k, node_v in skw.items() if k.endswith("_func") and isinstance(v := evaluate(node_v), str)
                    )
                    stages.append(
                        Stage(
                            stage_id=evaluate(skw["stage_id"]) if "stage_id" in skw else None,
                            model_stage=evaluate(skw["model_stage"]) if "model_stage" in skw else None,
                            model_arch=evaluate(skw["model_arch"]) if "model_arch" in skw else None,
                            final_output_type=evaluate(skw["final_output_type"])
                            if "final_output_type" in skw
                            else None,
                            processors=processors,
                            execution_type=evaluate(skw["execution_type"]) if "execution_type" in skw else None,
                        )
                    )
            for name in names:
                out.append(
                    Pipeline(
                        folder=folder,
                        var=name,
                        model_type=evaluate(kw["model_type"]) if "model_type" in kw else None,
                        model_arch=evaluate(kw["model_arch"]) if "model_arch" in kw else None,
                        deploy_name=evaluate(kw["default_deploy_config_name"])
                        if "default_deploy_config_name" in kw
                        else None,
                        stages=tuple(stages),
                        line=node.lineno,
                    )
                )
        elif value is not None:
            result = evaluate(value)
            for name in names:
                constants[name] = result
    return out


@dataclass
class TreeIndex:
    profile: LayoutProfile
    sources: dict[str, str] = field(default_factory=dict)  # rel -> text overrides (a plan's result)

    @property
    def root(self) -> Path:
        return self.profile.root

    def text(self, rel: str) -> str:
        if rel in self.sources:
            return self.sources[rel]
        path = self.root / rel
        return path.read_text(encoding="utf-8") if path.is_file() else ""

    def exists(self, rel: str) -> bool:
        return rel in self.sources or (self.root / rel).exists()

    # -- registries ------------------------------------------------------------------------------
    @cached_property
    def registry(self) -> dict[str, tuple[str, ...]]:
        return registered(self.text(layout.REGISTRY), "_OMNI_MODELS")

    @cached_property
    def pipeline_registry(self) -> dict[str, tuple[str, str] | None]:
        """key -> (module, VAR) in both the lazy (0.20-0.22) and eager (0.24+) registries."""
        source = self.text(layout.PIPELINE_REGISTRY)
        entries = registered(source, self.profile.pipeline_registry)
        imports = {}
        for node in ast.parse(source).body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    imports[alias.asname or alias.name] = node.module
        return {k: self.profile.era.registered_pipeline(v, imports) for k, v in entries.items()}

    @cached_property
    def pipeline_imports(self) -> set[tuple[str, str]]:
        source = self.text(layout.PIPELINE_REGISTRY)
        out = set()
        for node in ast.parse(source).body:
            if isinstance(node, ast.ImportFrom) and node.module:
                out |= {(node.module, a.name) for a in node.names}
        return out

    @cached_property
    def hf_configs(self) -> dict[str, tuple[str | None, str | None]]:
        return registered_configs(self.text(layout.HF_CONFIGS))

    @cached_property
    def pipelines(self) -> list[Pipeline]:
        out = []
        models = self.root / layout.MODELS
        folders = sorted({p.parent.name for p in models.glob("*/pipeline.py")})
        folders += sorted(
            {
                rel.split("/")[-2]
                for rel in self.sources
                if rel.startswith(layout.MODELS) and rel.endswith("/pipeline.py")
            }
        )
        for folder in dict.fromkeys(folders):
            out += parse_pipelines(folder, self.text(f"{layout.MODELS}/{folder}/pipeline.py"))
        return out

    @cached_property
    def legacy_pipelines(self) -> list[Pipeline]:
        """Topologies still in `model_executor/stage_configs/*.yaml` (0.20-0.24 fall back to them)."""
        out = []
        for path in sorted((self.root / layout.STAGE_CONFIGS).glob("*.yaml")):
            rel = f"{layout.STAGE_CONFIGS}/{path.name}"
            pipeline = parse_legacy_stage_config(rel, self.text(rel), self.registry)
            if pipeline is not None:
                out.append(pipeline)
        return out

    def deploy_rel(self, pipeline: Pipeline) -> str:
        name = pipeline.deploy_name or f"{pipeline.model_type}.yaml"
        return f"{layout.DEPLOY}/{name}"

    # -- serving ---------------------------------------------------------------------------------
    @cached_property
    def serving(self) -> str:
        return self.text(layout.SERVING)

    @cached_property
    def stage_constants(self) -> dict[str, str]:
        """stage key -> constant (0.20-0.26)."""
        return existing_stage_keys(self.serving) if self.profile.point("serving.constant") else {}

    @cached_property
    def union_members(self) -> set[str]:
        tree = self.serving_tree
        node = next(
            (n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", None) == UNION), None
        )
        names = set()
        for sub in ast.walk(node.value) if node is not None and node.value is not None else []:
            if isinstance(sub, ast.Name):
                names.add(sub.id)
        return names

    @cached_property
    def _serving_detector(self):
        return compile_detector(self.serving)

    @cached_property
    def adapters(self):
        if not self.profile.point("adapter"):
            return None
        sources = read_adapter_sources(self.root / layout.ADAPTERS)
        for rel, text in self.sources.items():
            if rel.startswith(layout.ADAPTERS + "/") and rel.endswith(".py"):
                sources[Path(rel).stem] = text
        return compile_adapter_registry(sources)

    @cached_property
    def adapter_import_tuple(self) -> list[str]:
        return (
            tuple_names(self.text(layout.ADAPTERS_INIT), layout.ADAPTERS_MODULE)
            if self.profile.point("adapter")
            else []
        )

    def detect(self, model_stage: str | None, model_arch: str | None) -> str | None:
        """The tree's own answer: which model type serves a stage with this key / architecture."""
        if self.profile.point("adapter.detect"):
            return self.adapters.detect(model_stage, model_arch)
        return self._serving_detector(model_stage, model_arch)

    def served_stage_keys(self) -> set[str]:
        if self.profile.point("adapter.detect"):
            return set(self.adapters.all_stage_keys())
        return set(self.stage_constants)

    def serving_methods_of(self, model_type: str) -> dict[str, bool]:
        """Which request-path methods of serving_speech.py name `model_type` (0.20-0.26)."""
        tree = self.serving_tree
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "OmniOpenAIServingSpeech"), None)
        found = {}
        for node in cls.body if cls else []:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in (
                "_validate_tts_request",
                "_prepare_speech_generation",
            ):
                found[node.name] = _compares_model_type(node, model_type)
        return found

    # -- served models ---------------------------------------------------------------------------
    def entry_stage(self, pipeline: Pipeline) -> tuple[Stage | None, str | None]:
        """(stage, detected type) of the stage /v1/audio/speech would serve, else (stage 0, None)."""
        for stage in pipeline.stages:
            detected = self.detect(stage.model_stage, pipeline.arch_of(stage))
            if detected is not None:
                return stage, detected
        return (pipeline.stages[0] if pipeline.stages else None), None

    def served_types(self) -> list[str]:
        """Every model type the tree's detection can return (its /v1/audio/speech models)."""
        return list(self._served_types)

    @cached_property
    def _served_types(self) -> tuple[str, ...]:
        if self.profile.point("adapter.detect"):
            return tuple(sorted(self.adapters.adapters))
        from omnitts.knowledge.detection import known_detections

        types = set(known_detections(self.serving).values())
        types |= {t for arch in self.arch_constants if (t := self.detect(None, arch)) is not None}
        return tuple(sorted(types))

    @cached_property
    def arch_constants(self) -> dict[str, str]:
        """architecture -> constant, for `_X_MODEL_ARCHS = {...}` sets (models found by architecture, 0.24-0.26)."""
        out: dict[str, str] = {}
        if self.profile.point("adapter.detect"):
            return out
        for node in self.serving_tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Set):
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id.endswith("_MODEL_ARCHS"):
                        out.update({e.value: t.id for e in node.value.elts if isinstance(e, ast.Constant)})
        return out

    @cached_property
    def serving_tree(self) -> ast.Module:
        return ast.parse(self.serving)


def _compares_model_type(func: ast.AST, model_type: str) -> bool:
    """Does the method test `self._tts_model_type` against `model_type` (==, in (...))?"""
    for node in ast.walk(func):
        if not isinstance(node, ast.Compare):
            continue
        left = node.left
        if not (isinstance(left, ast.Attribute) and left.attr == "_tts_model_type"):
            continue
        for comp in node.comparators:
            values = comp.elts if isinstance(comp, (ast.Tuple, ast.List, ast.Set)) else [comp]
            if any(isinstance(v, ast.Constant) and v.value == model_type for v in values):
                return True
    return False
