"""Layout profiles: the one place that knows how each vLLM-Omni era lays out a TTS model.

An era is detected from the tree's files (never from a version string): which registries exist, how
`serving_speech.py` dispatches, whether `tts_adapters/` exists and what its registry can do. A
profile carries the era's list of integration points (`points`), which `new`, `remove` and `check`
all read, so that the three commands agree on what an integration is. See docs/profiles.md for the
evidence behind each field.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from omnitts.scaffold.errors import ScaffoldError

PKG = "vllm_omni"
SERVING = f"{PKG}/entrypoints/openai/serving_speech.py"
ADAPTERS = f"{PKG}/entrypoints/openai/tts_adapters"
ADAPTERS_INIT = f"{ADAPTERS}/__init__.py"
ADAPTERS_BASE = f"{ADAPTERS}/base.py"
ADAPTERS_MODULE = "vllm_omni.entrypoints.openai.tts_adapters"
REGISTRY = f"{PKG}/model_executor/models/registry.py"
MODELS = f"{PKG}/model_executor/models"
PROCESSORS = f"{PKG}/model_executor/stage_input_processors"
PIPELINE_REGISTRY = f"{PKG}/config/pipeline_registry.py"
STAGE_CONFIG = f"{PKG}/config/stage_config.py"
DEPLOY = f"{PKG}/deploy"
STAGE_CONFIGS = f"{PKG}/model_executor/stage_configs"
HF_CONFIGS = f"{PKG}/engine/arg_utils.py"
WORKER_V2 = f"{PKG}/worker_v2"
OFFLINE_HUB = "examples/offline_inference/text_to_speech/README.md"
ONLINE_HUB = "examples/online_serving/text_to_speech/README.md"

FIVE_POINT = "five-point"
HYBRID = "hybrid"
ADAPTER = "adapter"


@dataclass(frozen=True)
class Point:
    """One integration point of an era: a generated file or an anchored patch of a shared file."""

    id: str
    where: str  # file (or folder) it lives in, with <name> / <model_type> placeholders
    what: str
    generated: bool = False  # a file of the model's own (created by `new`, deleted by `remove`)
    sources_only: bool = False  # examples / tests / hub READMEs: absent from wheels
    optional: bool = False  # not every model needs it (HF config registration, stage processor)


_PACKAGE = Point("package", f"{MODELS}/<name>/", "model package (config, stage modules)", generated=True)
_PROCESSOR = Point(
    "processor", f"{PROCESSORS}/<name>.py", "stage input processor (two-stage)", generated=True, optional=True
)
_PIPELINE = Point("pipeline", f"{MODELS}/<name>/pipeline.py", "PipelineConfig (topology)", generated=True)
_DEPLOY = Point(
    "deploy", f"{DEPLOY}/<model_type>.yaml", "deploy config (stages: ids match the pipeline)", generated=True
)
_REGISTRY = Point("registry", REGISTRY, "_OMNI_MODELS entry per architecture")
_HF_CONFIG = Point(
    "hf_config", HF_CONFIGS, "_register_omni_hf_configs() import + (model_type, Config) pair", optional=True
)
_EXAMPLES = Point(
    "examples", "examples/*/text_to_speech/<name>/", "offline + online examples", generated=True, sources_only=True
)
_TESTS = Point("tests", "tests/e2e/*/test_<name>.py", "e2e tests (offline + online)", generated=True, sources_only=True)
_HUB = Point("hub_readme", "examples/*/text_to_speech/README.md", "hub README row + section", sources_only=True)

FIVE_POINT_POINTS = (
    _PACKAGE,
    _PROCESSOR,
    _PIPELINE,
    _DEPLOY,
    _REGISTRY,
    Point("pipeline_registry", PIPELINE_REGISTRY, "_OMNI_PIPELINES[model_type] = (module, VAR)"),
    _HF_CONFIG,
    Point("serving.constant", SERVING, "stage constant _<M>_TTS_MODEL_STAGES holds the entry stage key"),
    Point("serving.union", SERVING, "the constant is part of _TTS_MODEL_STAGES"),
    Point("serving.detect", SERVING, "_detect_tts_model_type() returns the model type for the stage key"),
    Point("serving.validate", SERVING, "_validate_tts_request() dispatches the model type (else: Qwen3-TTS rules)"),
    Point("serving.build", SERVING, "_prepare_speech_generation() builds the model's request (else: Qwen3-TTS path)"),
    _EXAMPLES,
    _TESTS,
    _HUB,
)
_EAGER_PIPELINE_REGISTRY = Point(
    "pipeline_registry", PIPELINE_REGISTRY, "OMNI_PIPELINES[model_type] = VAR, imported in isort order"
)
_ADAPTER = Point("adapter", f"{ADAPTERS}/<name>.py", "TTS adapter registered under the model type", generated=True)
_ADAPTER_IMPORT = Point(
    "adapter_import", ADAPTERS_INIT, "adapter module in the import tuple of tts_adapters/__init__.py"
)
HYBRID_POINTS = (
    _PACKAGE,
    _PROCESSOR,
    _PIPELINE,
    _DEPLOY,
    _REGISTRY,
    _EAGER_PIPELINE_REGISTRY,
    _HF_CONFIG,
    Point("serving.constant", SERVING, "stage constant _<M>_TTS_MODEL_STAGES holds the entry stage key"),
    Point("serving.union", SERVING, "the constant is part of _TTS_MODEL_STAGES"),
    Point("serving.detect", SERVING, "_detect_tts_model_type() returns the adapter's name for the stage key"),
    _ADAPTER,
    _ADAPTER_IMPORT,
    Point(
        "adapter.stage_keys",
        f"{ADAPTERS}/<name>.py",
        "adapter's stage_keys name the entry stage key (documentation in 0.24-0.26)",
    ),
    _EXAMPLES,
    _TESTS,
    _HUB,
)
ADAPTER_POINTS = (
    _PACKAGE,
    _PROCESSOR,
    _PIPELINE,
    _DEPLOY,
    _REGISTRY,
    _EAGER_PIPELINE_REGISTRY,
    _HF_CONFIG,
    _ADAPTER,
    _ADAPTER_IMPORT,
    Point("adapter.stage_keys", f"{ADAPTERS}/<name>.py", "adapter's stage_keys / model_archs cover the entry stage"),
    Point("adapter.detect", ADAPTERS_INIT, "detect_tts_model_type(stage, arch) returns the adapter's name"),
    _EXAMPLES,
    _TESTS,
    _HUB,
)


@dataclass(frozen=True)
class LayoutProfile:
    """Where a TTS integration lives in one era, and what that era's runtime really does."""

    era: str
    releases: str
    root: Path
    # Per-request id keys the runner really writes into each request's dict, in lookup order.
    request_id_keys: tuple[str, ...]
    # The engine's output consolidation: (module, qualified name) of the function the validators use.
    consolidation: tuple[str, str]
    evidence: tuple[str, ...] = field(default=())
    version: str | None = None
    points: tuple[Point, ...] = FIVE_POINT_POINTS
    # "_OMNI_PIPELINES" (lazy (module, VAR) tuples, 0.20-0.22) or "OMNI_PIPELINES" (eager, 0.24+).
    pipeline_registry: str = "_OMNI_PIPELINES"
    # PipelineConfig has `default_deploy_config_name` (0.26+): stage construction loads that yaml.
    deploy_name_field: bool = False
    # tts_adapters/base.py declares max_new_tokens_min / max_new_tokens_max (0.26+).
    adapter_token_bounds: bool = False
    # tts_adapters/__init__.py resolves models itself (detect_tts_model_type, 0.28+): stage_keys are
    # load-bearing, model_archs / detect_priority exist.
    adapter_detection: bool = False
    # serving_speech._resolve_ref_audio returns (wav, sr, cache_key) (0.28+) instead of (wav, sr).
    ref_audio_cache_key: bool = False
    # Omni.generate() yields OmniRequestOutput subclassing vLLM's RequestOutput (0.28+: `.outputs` on it) rather
    # than a wrapper whose `.request_output` holds the RequestOutput.
    flat_request_output: bool = False

    def path(self, rel: str) -> Path:
        return self.root / rel

    @property
    def has_sources(self) -> bool:
        """True for a source checkout or sdist (examples/, tests/, pyproject.toml); wheels hold the package only."""
        return (self.root / "pyproject.toml").is_file() and (self.root / "examples").is_dir()

    @property
    def has_adapters(self) -> bool:
        return self.era in (HYBRID, ADAPTER)

    @property
    def serving_points(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.points if p.id.startswith("serving."))

    def point(self, point_id: str) -> Point | None:
        return next((p for p in self.points if p.id == point_id), None)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise ScaffoldError(f"cannot read {path}: {exc.strerror}") from exc


def _module_assign_names(source: str) -> set[str]:
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


def _class_fields(source: str, class_name: str) -> set[str]:
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


def _flat_request_output(root: Path) -> bool:
    """True where the release's OmniRequestOutput is itself a vLLM RequestOutput (read from its class bases)."""
    for rel in (f"{PKG}/outputs/__init__.py", f"{PKG}/outputs.py"):
        source = _read(root / rel)
        if source:
            return re.search(r"^class OmniRequestOutput\((\w+\.)?RequestOutput\)", source, re.M) is not None
    return False


def tree_version(root: Path) -> str | None:
    """Release version for messages only (eras are detected from files)."""
    for meta in [root / "PKG-INFO", *sorted(root.glob("vllm_omni-*.dist-info/METADATA"))]:
        match = re.search(r"^Version: (\S+)", _read(meta), re.M)
        if match:
            return match.group(1)
    return None


def is_vllm_omni_tree(root: Path) -> bool:
    return (root / PKG / "__init__.py").is_file() and (root / REGISTRY).is_file()


def detect_profile(root: Path) -> LayoutProfile:
    """Detect the layout era of the vLLM-Omni tree at ``root``; refuse what is not a tree or not supported."""
    root = Path(root).resolve()
    if not is_vllm_omni_tree(root):
        raise ScaffoldError(f"{root} is not a vLLM-Omni tree (no {REGISTRY}); pass --target DIR or pypi:vllm-omni==X")
    version = tree_version(root)
    serving = _read(root / SERVING)
    serving_names = _module_assign_names(serving)
    pipeline_names = _module_assign_names(_read(root / PIPELINE_REGISTRY))
    has_adapters = (root / ADAPTERS_INIT).is_file()
    adapters_init = _read(root / ADAPTERS_INIT)
    adapter_base = _read(root / ADAPTERS_BASE)
    has_deploy = (root / DEPLOY).is_dir()
    union = "_TTS_MODEL_STAGES" in serving_names
    detects = "def _detect_tts_model_type" in serving
    stage_constants = sorted(
        n for n in serving_names if re.fullmatch(r"_\w+_MODEL_STAGES", n) and n != "_TTS_MODEL_STAGES"
    )
    registry_detection = "def detect_tts_model_type" in adapters_init
    pipeline_registry = next((n for n in ("_OMNI_PIPELINES", "OMNI_PIPELINES") if n in pipeline_names), None)
    evidence = (
        "serving_speech.py: "
        + (
            f"{len(stage_constants)} stage constants + _TTS_MODEL_STAGES union"
            if union
            else "no _TTS_MODEL_STAGES union"
        ),
        "tts_adapters/: "
        + (("present, detect_tts_model_type" if registry_detection else "present") if has_adapters else "absent"),
        f"pipeline registry: {pipeline_registry or 'absent'}",
        f"deploy/: {'present' if has_deploy else 'absent'}",
    )
    found = "; ".join(evidence)
    worker_v2 = (root / WORKER_V2).is_dir()
    common = dict(
        root=root,
        evidence=evidence,
        version=version,
        # 0.20-0.28 runners write the scheduler id as `request_id` before preprocess(); 0.30's Model
        # Runner V2 (vllm_omni/worker_v2/) writes `req_id` instead, and V1 is still selectable.
        request_id_keys=("req_id", "request_id") if worker_v2 else ("request_id",),
        deploy_name_field="default_deploy_config_name" in _class_fields(_read(root / STAGE_CONFIG), "PipelineConfig"),
        adapter_token_bounds="max_new_tokens_max" in _class_fields(adapter_base, "TTSModelAdapter"),
        flat_request_output=_flat_request_output(root),
        ref_audio_cache_key=bool(re.search(r"def _resolve_ref_audio\(self[^)]*\)\s*->\s*tuple\[.*,\s*str\]:", serving)),
    )
    consolidation_new = ("vllm_omni.outputs.output_processor", "OmniRequestState._consolidate_multimodal_tensors")
    consolidation_old = ("vllm_omni.engine.output_processor", "OmniRequestState._consolidate_multimodal_tensors")
    if (root / f"{PKG}/outputs/output_processor.py").is_file():
        consolidation = consolidation_new
    else:
        consolidation = consolidation_old
    if has_deploy and pipeline_registry:
        if not has_adapters and union and detects and stage_constants and pipeline_registry == "_OMNI_PIPELINES":
            return LayoutProfile(
                era=FIVE_POINT, releases="0.20-0.22", consolidation=consolidation, points=FIVE_POINT_POINTS, **common
            )
        if has_adapters and pipeline_registry == "OMNI_PIPELINES":
            if union and detects and stage_constants and not registry_detection:
                return LayoutProfile(
                    era=HYBRID,
                    releases="0.24-0.26",
                    consolidation=consolidation,
                    points=HYBRID_POINTS,
                    pipeline_registry="OMNI_PIPELINES",
                    **common,
                )
            if not union and registry_detection:
                return LayoutProfile(
                    era=ADAPTER,
                    releases="0.28-0.30",
                    consolidation=consolidation,
                    points=ADAPTER_POINTS,
                    pipeline_registry="OMNI_PIPELINES",
                    adapter_detection=True,
                    **common,
                )
    if not has_adapters and union and stage_constants and detects and not pipeline_registry:
        era = "legacy stage_configs (0.18)"
        why = (
            "its runner writes no per-request `request_id` before preprocess() (0.20+ do), topology is a"
            " stage_args yaml under stage_configs/, and _TTS_MODEL_STAGES is a one-line union"
        )
    elif union and not stage_constants:
        era = "single-model serving (0.14-0.16)"
        why = "/v1/audio/speech serves Qwen3-TTS only (_TTS_MODEL_STAGES = {'qwen3_tts'}, no per-model dispatch)"
    elif not serving:
        era = "no /v1/audio/speech serving"
        why = "there is no serving_speech.py"
    else:
        era = "unknown"
        why = "its files match none of the known eras"
    raise ScaffoldError(
        f"unsupported vLLM-Omni layout at {root} (version {version or 'unknown'}): looks like the {era} era ({found});"
        " omnitts-scaffold supports the five-point (0.20-0.22), hybrid adapters (0.24-0.26)"
        " and adapter-only (0.28-0.30)"
        f" eras: {why}"
    )


ERA_TITLES = {FIVE_POINT: "five-point", HYBRID: "hybrid adapters", ADAPTER: "adapter-only"}
