"""What an era is: its integration points, how it is recognised from a tree's files, which shared-file
patches make an integration (each with its exact inverse), and the facts its templates and checks need.

The patches are named, not imported: the codemods that carry them out live in `omnitts.scaffold.codemods`
(the mechanism); an era says which ones apply, with which arguments, in which order. `omnitts.scaffold`
maps each name to its codemod class. A new era is one module under `knowledge/eras/` plus its tests.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from omnitts.knowledge import layout


@dataclass(frozen=True)
class Point:
    """One integration point of an era: a generated file or an anchored patch of a shared file."""

    id: str
    where: str  # file (or folder) it lives in, with <name> / <model_type> placeholders
    what: str
    generated: bool = False  # a file of the model's own (created by `new`, deleted by `remove`)
    sources_only: bool = False  # examples / tests / hub READMEs: absent from wheels
    optional: bool = False  # not every model needs it (HF config registration, stage processor)


# Points every era shares.
PACKAGE = Point("package", f"{layout.MODELS}/<name>/", "model package (config, stage modules)", generated=True)
PROCESSOR = Point(
    "processor", f"{layout.PROCESSORS}/<name>.py", "stage input processor (two-stage)", generated=True, optional=True
)
PIPELINE = Point("pipeline", f"{layout.MODELS}/<name>/pipeline.py", "PipelineConfig (topology)", generated=True)
DEPLOY = Point(
    "deploy", f"{layout.DEPLOY}/<model_type>.yaml", "deploy config (stages: ids match the pipeline)", generated=True
)
REGISTRY = Point("registry", layout.REGISTRY, "_OMNI_MODELS entry per architecture")
HF_CONFIG = Point(
    "hf_config", layout.HF_CONFIGS, "_register_omni_hf_configs() import + (model_type, Config) pair", optional=True
)
EXAMPLES = Point(
    "examples", "examples/*/text_to_speech/<name>/", "offline + online examples", generated=True, sources_only=True
)
TESTS = Point("tests", "tests/e2e/*/test_<name>.py", "e2e tests (offline + online)", generated=True, sources_only=True)
HUB = Point("hub_readme", "examples/*/text_to_speech/README.md", "hub README row + section", sources_only=True)
LAZY_PIPELINE_REGISTRY = Point(
    "pipeline_registry", layout.PIPELINE_REGISTRY, "_OMNI_PIPELINES[model_type] = (module, VAR)"
)
EAGER_PIPELINE_REGISTRY = Point(
    "pipeline_registry", layout.PIPELINE_REGISTRY, "OMNI_PIPELINES[model_type] = VAR, imported in isort order"
)
ADAPTER = Point(
    "adapter", f"{layout.ADAPTERS}/<name>.py", "TTS adapter registered under the model type", generated=True
)
ADAPTER_IMPORT = Point(
    "adapter_import", layout.ADAPTERS_INIT, "adapter module in the import tuple of tts_adapters/__init__.py"
)
SERVING_CONSTANT = Point(
    "serving.constant", layout.SERVING, "stage constant _<M>_TTS_MODEL_STAGES holds the entry stage key"
)
SERVING_UNION = Point("serving.union", layout.SERVING, "the constant is part of _TTS_MODEL_STAGES")
# serving_speech.py dispatching on the model type, before serving moved to per-model adapters
SERVING_DISPATCH = (
    Point("serving.detect", layout.SERVING, "_detect_tts_model_type() returns the model type for the stage key"),
    Point(
        "serving.validate", layout.SERVING, "_validate_tts_request() dispatches the model type (else: Qwen3-TTS rules)"
    ),
    Point(
        "serving.build",
        layout.SERVING,
        "_prepare_speech_generation() builds the model's request (else: Qwen3-TTS path)",
    ),
)


@dataclass(frozen=True)
class Integration:
    """Every shared-file entry of one model (all tuples, so that it pickles into worker processes)."""

    name: str  # package folder, module stem of the adapter / stage processor, method names
    camel: str
    upper: str
    model_type: str  # serving type = adapter name (the detected string)
    stage_keys: tuple[str, ...]  # entry stage key(s) serving detects
    registry: tuple[tuple[str, str, str, str], ...] = ()  # (arch, folder, module, class)
    pipelines: tuple[tuple[str, str, str], ...] = ()  # (pipeline key, module, VAR)
    hf_configs: tuple[tuple[str, str, str], ...] = ()  # (model_type, module, Config class)
    adapter_module: str | None = None  # tts_adapters/<module>.py, listed in the import tuple
    voice_cloning: bool = False


@dataclass(frozen=True)
class PatchSpec:
    """One named codemod on one shared file, and the named codemod that undoes it byte for byte."""

    rel: str
    codemod: str
    kwargs: tuple
    inverse: str
    inverse_kwargs: tuple


@dataclass(frozen=True)
class TreeFiles:
    """What era detection reads from a tree (its files only, never a version string)."""

    root: Path
    serving: str
    serving_names: frozenset[str]
    stage_constants: tuple[str, ...]
    pipeline_registry: str | None  # "_OMNI_PIPELINES" / "OMNI_PIPELINES" / None
    has_adapters: bool
    adapters_init: str
    adapter_base: str
    has_deploy: bool

    @property
    def union(self) -> bool:
        return "_TTS_MODEL_STAGES" in self.serving_names

    @property
    def serving_detects(self) -> bool:
        return "def _detect_tts_model_type" in self.serving

    @property
    def registry_detects(self) -> bool:
        return "def detect_tts_model_type" in self.adapters_init

    def evidence(self) -> str:
        union = (
            f"{len(self.stage_constants)} stage constants + _TTS_MODEL_STAGES union"
            if self.union
            else "no _TTS_MODEL_STAGES union"
        )
        adapters = (
            ("present, detect_tts_model_type" if self.registry_detects else "present")
            if self.has_adapters
            else "absent"
        )
        return "; ".join(
            (
                f"serving_speech.py: {union}",
                f"tts_adapters/: {adapters}",
                f"pipeline registry: {self.pipeline_registry or 'absent'}",
                f"deploy/: {'present' if self.has_deploy else 'absent'}",
            )
        )


def module_assign_names(source: str) -> set[str]:
    names: set[str] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return names
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def class_fields(source: str, class_name: str) -> set[str]:
    """Names assigned (or annotated) in the body of a module-level class."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    out: set[str] = set()
    for node in cls.body if cls else []:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return out


def read_tree_files(root: Path) -> TreeFiles:
    serving = layout.read_text(root / layout.SERVING)
    serving_names = module_assign_names(serving)
    pipeline_names = module_assign_names(layout.read_text(root / layout.PIPELINE_REGISTRY))
    return TreeFiles(
        root=root,
        serving=serving,
        serving_names=frozenset(serving_names),
        stage_constants=tuple(
            sorted(n for n in serving_names if re.fullmatch(r"_\w+_MODEL_STAGES", n) and n != "_TTS_MODEL_STAGES")
        ),
        pipeline_registry=next((n for n in ("_OMNI_PIPELINES", "OMNI_PIPELINES") if n in pipeline_names), None),
        has_adapters=(root / layout.ADAPTERS_INIT).is_file(),
        adapters_init=layout.read_text(root / layout.ADAPTERS_INIT),
        adapter_base=layout.read_text(root / layout.ADAPTERS_BASE),
        has_deploy=(root / layout.DEPLOY).is_dir(),
    )


class Era:
    """One layout era. Subclasses set the class attributes and implement `matches`."""

    name: str  # short id used in messages and reports ("five-point")
    title: str  # "hybrid adapters"
    releases: str  # "0.24-0.26" (documentation: detection reads files)
    points: tuple[Point, ...]
    # "_OMNI_PIPELINES" (lazy (module, VAR) tuples) or "OMNI_PIPELINES" (eager, imported VARs).
    pipeline_registry: str
    # tts_adapters/ exists: a model's adapter module is generated and listed in the import tuple.
    has_adapters: bool = False
    # tts_adapters/__init__.py resolves models itself (detect_tts_model_type): stage_keys are load-bearing,
    # model_archs / detect_priority exist; serving_speech.py holds no per-model dispatch.
    adapter_detection: bool = False
    # The codemod that patches serving_speech.py, and its inverse; None where serving is not patched.
    serving_codemod: tuple[str, str] | None = None
    # Why a model served by serving_speech.py's own branches has no adapter (hybrid era).
    legacy_serving_branches: bool = False
    # Topology is a `stage_args:` yaml under model_executor/stage_configs/ (0.18), not pipeline.py + deploy/.
    stage_args_topology: bool = False

    @classmethod
    def matches(cls, files: TreeFiles) -> bool:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name

    @property
    def serving_points(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.points if p.id.startswith("serving."))

    def point(self, point_id: str) -> Point | None:
        return next((p for p in self.points if p.id == point_id), None)

    # -- patches ------------------------------------------------------------------------------------
    def adapter_module(self, name: str) -> str | None:
        """The adapter module a new model gets (None where the era has no adapters)."""
        return name if self.has_adapters else None

    def patches(self, integ: Integration) -> list[PatchSpec]:
        """The era's patches of shared files, in the order they are applied."""
        out = [
            PatchSpec(
                layout.REGISTRY,
                "AddDictTupleEntry",
                (
                    ("dict_name", "_OMNI_MODELS"),
                    ("key", arch),
                    ("values", (folder, module, cls)),
                    ("what", "architecture"),
                ),
                "RemoveDictEntry",
                (("dict_name", "_OMNI_MODELS"), ("key", arch), ("value", (folder, module, cls))),
            )
            for arch, folder, module, cls in integ.registry
        ]
        for key, module, var in integ.pipelines:
            out += self.pipeline_patches(key, module, var)
        for model_type, module, cls in integ.hf_configs:
            kwargs = (("model_type", model_type), ("module", module), ("class_name", cls))
            out.append(PatchSpec(layout.HF_CONFIGS, "RegisterHfConfig", kwargs, "UnregisterHfConfig", kwargs))
        if self.serving_codemod:
            kwargs = (
                ("name", integ.name),
                ("camel", integ.camel),
                ("upper", integ.upper),
                ("model_type", integ.model_type),
                ("stage_keys", integ.stage_keys),
                ("voice_cloning", integ.voice_cloning),
            )
            out.append(PatchSpec(layout.SERVING, self.serving_codemod[0], kwargs, self.serving_codemod[1], kwargs))
        if self.has_adapters and integ.adapter_module:
            kwargs = (("module", layout.ADAPTERS_MODULE), ("name", integ.adapter_module))
            out.append(PatchSpec(layout.ADAPTERS_INIT, "AddImportAlias", kwargs, "RemoveImportAlias", kwargs))
        return out

    def pipeline_patches(self, key: str, module: str, var: str) -> list[PatchSpec]:
        raise NotImplementedError


class LazyPipelineRegistry:
    """0.20-0.22: `_OMNI_PIPELINES[key] = (module, VAR)`, imported lazily."""

    pipeline_registry = "_OMNI_PIPELINES"

    def pipeline_patches(self, key: str, module: str, var: str) -> list[PatchSpec]:
        return [
            PatchSpec(
                layout.PIPELINE_REGISTRY,
                "AddDictTupleEntry",
                (("dict_name", "_OMNI_PIPELINES"), ("key", key), ("values", (module, var)), ("what", "pipeline")),
                "RemoveDictEntry",
                (("dict_name", "_OMNI_PIPELINES"), ("key", key), ("value", (module, var))),
            )
        ]

    @staticmethod
    def registered_pipeline(value, imports: dict[str, str]) -> tuple[str, str] | None:
        return value if isinstance(value, tuple) and len(value) == 2 else None


class EagerPipelineRegistry:
    """0.24+: `from module import VAR` in isort order, then `OMNI_PIPELINES[key] = VAR`."""

    pipeline_registry = "OMNI_PIPELINES"

    def pipeline_patches(self, key: str, module: str, var: str) -> list[PatchSpec]:
        imp = (("module", module), ("name", var))
        return [
            PatchSpec(layout.PIPELINE_REGISTRY, "AddModuleImport", imp, "RemoveModuleImport", imp),
            PatchSpec(
                layout.PIPELINE_REGISTRY,
                "AddDictNameEntry",
                (("dict_name", "OMNI_PIPELINES"), ("key", key), ("value", var), ("what", "pipeline")),
                "RemoveDictEntry",
                (("dict_name", "OMNI_PIPELINES"), ("key", key), ("value", var)),
            ),
        ]

    @staticmethod
    def registered_pipeline(value, imports: dict[str, str]) -> tuple[str, str] | None:
        return (imports[value], value) if isinstance(value, str) and value in imports else None
