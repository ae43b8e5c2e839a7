"""`omnitts-scaffold check NAME`: the integration report of one model in any supported tree.

Each integration point of the tree's era (the profile's `points`) is reported as present, missing
or inconsistent (for example: the entry stage key is in the pipeline and the deploy yaml but not in
the adapter; the tree's own detection resolves the stage to another model). NAME may be a model
type as serving detects it (`fish_tts`), a pipeline key (`fish_qwen3_omni`) or a model folder
(`fish_speech`). Nothing is written; everything is read with `ast` / YAML, nothing is imported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import yaml

from omnitts.knowledge import layout
from omnitts.knowledge.eras import LayoutProfile
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.index import Pipeline, Stage, TreeIndex

PRESENT, MISSING, INCONSISTENT, NA, OPTIONAL = "present", "missing", "inconsistent", "n/a", "absent (optional)"
GAPS = (MISSING, INCONSISTENT)
SYMBOL = {PRESENT: "✓", MISSING: "✗", INCONSISTENT: "≠", NA: "–", OPTIONAL: "·"}
DIFFUSION_REGISTRY = "vllm_omni/diffusion/registry.py"


@dataclass
class PointResult:
    point: str
    status: str
    detail: str = ""


@dataclass
class ModelView:
    """One served (or servable) model: its detected type, folder and pipelines."""

    model_type: str | None  # what serving detects; None when nothing detects it
    folder: str | None
    pipelines: list[Pipeline] = field(default_factory=list)
    diffusion: bool = False  # served by OmniOpenAIServingSpeech.for_diffusion() (type hard-coded)

    @property
    def label(self) -> str:
        return self.model_type or (self.pipelines[0].model_type if self.pipelines else self.folder) or "?"


@dataclass
class ModelReport:
    query: str
    view: ModelView
    era: str
    version: str | None
    results: list[PointResult]

    @property
    def gaps(self) -> list[PointResult]:
        return [r for r in self.results if r.status in GAPS]

    @property
    def complete(self) -> bool:
        return not self.gaps

    def status(self, point: str) -> str | None:
        return next((r.status for r in self.results if r.point == point), None)


# -- which model does NAME mean ---------------------------------------------------------------------
def _diffusion_types(index: TreeIndex) -> set[str]:
    """Types hard-coded by `for_diffusion()` (pure-diffusion TTS bypasses stage detection)."""
    tree = index.serving_tree
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "OmniOpenAIServingSpeech"), None)
    out = set()
    for node in cls.body if cls else []:
        if isinstance(node, ast.FunctionDef) and node.name == "for_diffusion":
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Assign)
                    and isinstance(sub.value, ast.Constant)
                    and isinstance(sub.value.value, str)
                ):
                    if any(isinstance(t, ast.Attribute) and t.attr == "_tts_model_type" for t in sub.targets):
                        out.add(sub.value.value)
    return out


def _folder_of_type(index: TreeIndex, model_type: str) -> str | None:
    if index.adapters and model_type in index.adapters.adapters:
        module = index.adapters.adapters[model_type].module
        if (index.root / layout.MODELS / module).is_dir():
            return module
    if (index.root / layout.MODELS / model_type).is_dir():
        return model_type
    return None


def _prefer_home(index: TreeIndex, model_type: str, pipes: list[Pipeline]) -> list[Pipeline]:
    """The model's own pipelines among those its detection serves.

    Omni pipelines that embed another model's talker stage (aura_omni's qwen3_tts stage) are served
    by that model's adapter too; the model's own integration is in its home folder (its type or its
    adapter's module), else in the pipeline whose model_type is the served type.
    """
    home = {model_type}
    if index.adapters and model_type in index.adapters.adapters:
        home.add(index.adapters.adapters[model_type].module)
    return [p for p in pipes if p.folder in home] or [p for p in pipes if p.model_type == model_type] or pipes


def _view_of_type(index: TreeIndex, model_type: str, diffusion: set[str]) -> ModelView:
    detected = [p for p in index.pipelines if index.entry_stage(p)[1] == model_type]
    pipes = _prefer_home(index, model_type, detected)
    if pipes:
        return ModelView(model_type, pipes[0].folder, pipes)
    if model_type in diffusion:
        # Pure-diffusion TTS: served by OmniOpenAIServingSpeech.for_diffusion(), which sets the type.
        candidates = [p for p in index.pipelines + index.legacy_pipelines if p.model_type == model_type and p.diffusion]
        folder = candidates[0].folder if candidates else _folder_of_type(index, model_type)
        return ModelView(model_type, folder, candidates[:1], diffusion=True)
    legacy = _prefer_home(
        index, model_type, [p for p in index.legacy_pipelines if index.entry_stage(p)[1] == model_type]
    )
    if legacy:
        return ModelView(model_type, legacy[0].folder, legacy)
    # Nothing detects as this type: its own folder's pipelines, which `check` then reports as inconsistent.
    folder = _folder_of_type(index, model_type)
    return ModelView(model_type, folder, [p for p in index.pipelines if p.folder == folder] if folder else [])


def model_views(index: TreeIndex, name: str) -> list[ModelView]:
    served = set(index.served_types())
    diffusion = _diffusion_types(index)
    if name in served or name in diffusion:
        return [_view_of_type(index, name, diffusion)]
    detected = {id(p): index.entry_stage(p)[1] for p in index.pipelines}
    candidates = [p for p in index.pipelines if p.model_type == name]
    if not candidates:
        candidates = [p for p in index.pipelines if p.folder == name]
        candidates = [p for p in candidates if detected[id(p)] is not None or p.audio_only] or candidates
    if not candidates:
        known = ", ".join(sorted(served | diffusion))
        raise ScaffoldError(
            f"no model {name!r} in this tree (not a served model type, pipeline key or model folder);"
            f" served types: {known}"
        )
    views: dict[str | None, ModelView] = {}
    for p in candidates:
        model_type = detected[id(p)]
        if model_type is not None and p not in _view_of_type(index, model_type, diffusion).pipelines:
            model_type = None  # detected as another model's (dots_tts -> voxcpm2 in 0.28)
        if model_type is None and p.model_type in diffusion and p.diffusion:
            view = views.setdefault(p.model_type, ModelView(p.model_type, p.folder, diffusion=True))
        else:
            view = views.setdefault(
                model_type if model_type is not None else f"?{p.var}", ModelView(model_type, p.folder)
            )
        view.pipelines.append(p)
    return list(views.values())


# -- the checks -------------------------------------------------------------------------------------
def _module_file(index: TreeIndex, dotted: str) -> str | None:
    rel = dotted.replace(".", "/")
    for cand in (f"{rel}.py", f"{rel}/__init__.py"):
        if index.exists(cand):
            return cand
    return None


def _defines(index: TreeIndex, rel: str, name: str) -> bool:
    try:
        tree = ast.parse(index.text(rel))
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def _diffusion_registry(index: TreeIndex) -> dict:
    from omnitts.scaffold.codemods.registry import registered

    return registered(index.text(DIFFUSION_REGISTRY), "_DIFFUSION_MODELS")


def _check_registry(index: TreeIndex, view: ModelView) -> PointResult:
    missing, broken, ok = [], [], []
    diffusion_models = None
    for p in view.pipelines:
        for stage in p.stages:
            arch = p.arch_of(stage)
            if not arch or arch in ok:
                continue
            if stage.execution_type == "DIFFUSION":
                diffusion_models = diffusion_models if diffusion_models is not None else _diffusion_registry(index)
                entry, base = diffusion_models.get(arch), "vllm_omni.diffusion.models"
            else:
                entry, base = index.registry.get(arch), "vllm_omni.model_executor.models"
            if entry is None:
                missing.append(arch)
                continue
            folder, module, cls = entry
            rel = _module_file(index, f"{base}.{folder}.{module}")
            if rel is None or not _defines(index, rel, cls):
                broken.append(f"{arch} -> {folder}.{module}.{cls}")
            else:
                ok.append(arch)
    if not view.pipelines and view.diffusion and view.folder:
        entries = {a: e for a, e in _diffusion_registry(index).items() if e and e[0] == view.folder}
        good = [
            a
            for a, (f, mod, cls) in entries.items()
            if (rel := _module_file(index, f"vllm_omni.diffusion.models.{f}.{mod}")) and _defines(index, rel, cls)
        ]
        if good:
            return PointResult("registry", PRESENT, f"_DIFFUSION_MODELS: {', '.join(good)}")
        return PointResult("registry", MISSING, f"no _DIFFUSION_MODELS entry for {view.folder}")
    if not view.pipelines:
        return PointResult("registry", NA, "no pipeline names an architecture")
    if missing:
        return PointResult("registry", MISSING, f"not registered: {', '.join(missing)}")
    if broken:
        return PointResult("registry", INCONSISTENT, f"entry points at no class: {', '.join(broken)}")
    return PointResult("registry", PRESENT, ", ".join(ok))


def registry_keys(index: TreeIndex, pipeline: Pipeline) -> list[str]:
    """Pipeline-registry keys (HF model types) that resolve to this pipeline."""
    module = f"vllm_omni.model_executor.models.{pipeline.folder}.pipeline"
    return [k for k, e in index.pipeline_registry.items() if e == (module, pipeline.var)]


def _no_pipeline(point: str, view: ModelView) -> PointResult | None:
    if any(p.legacy for p in view.pipelines):
        return PointResult(point, NA, "legacy stage_configs yaml (found by file name, holds the deploy settings)")
    if not view.pipelines:
        return PointResult(point, NA, "no pipeline")
    return None


def _check_pipeline_registry(index: TreeIndex, view: ModelView) -> PointResult:
    if (na := _no_pipeline("pipeline_registry", view)) is not None:
        return na
    problems, ok = [], []
    for p in view.pipelines:
        keys = registry_keys(index, p)
        if keys:
            ok += keys
        elif p.model_type in index.pipeline_registry:
            problems.append(
                (
                    INCONSISTENT,
                    f"{p.model_type!r} maps to {index.pipeline_registry[p.model_type]},"
                    f" not {p.folder}/pipeline.py:{p.var}",
                )
            )
        else:
            problems.append((MISSING, f"{p.var} is not in {index.profile.pipeline_registry}"))
    if problems:
        status = MISSING if all(s == MISSING for s, _ in problems) else INCONSISTENT
        return PointResult("pipeline_registry", status, "; ".join(d for _, d in problems))
    return PointResult("pipeline_registry", PRESENT, ", ".join(ok))


def _deploy_stage_ids(text: str) -> list | None:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict):
        return None
    stages = data.get("stages") or []
    return [s.get("stage_id") for s in stages if isinstance(s, dict)]


def deploy_candidates(index: TreeIndex, pipeline: Pipeline) -> list[str]:
    """Where the engine looks for this pipeline's deploy yaml: `default_deploy_config_name` (0.26+),
    else `deploy/<HF model_type>.yaml` for every registry key of the pipeline (resolve_model_config_path)."""
    if pipeline.deploy_name:
        return [f"{layout.DEPLOY}/{pipeline.deploy_name}"]
    names = [*registry_keys(index, pipeline), pipeline.model_type]
    return [f"{layout.DEPLOY}/{n}.yaml" for n in dict.fromkeys(n for n in names if n)]


def _check_deploy(index: TreeIndex, view: ModelView) -> PointResult:
    if (na := _no_pipeline("deploy", view)) is not None:
        return na
    problems, ok = [], []
    for p in view.pipelines:
        candidates = deploy_candidates(index, p)
        rel = next((c for c in candidates if index.exists(c)), None)
        if rel is None:
            problems.append((MISSING, f"{' / '.join(candidates)} not found"))
            continue
        ids = _deploy_stage_ids(index.text(rel))
        pipeline_ids = {s.stage_id for s in p.stages}
        if ids is None:
            problems.append((INCONSISTENT, f"{rel} does not parse as a deploy config"))
        elif not set(ids) <= pipeline_ids:
            problems.append((INCONSISTENT, f"{rel} stage ids {sorted(set(ids) - pipeline_ids)} are not in {p.var}"))
        else:
            ok.append(rel.rsplit("/", 1)[-1])
    if problems:
        status = MISSING if all(s == MISSING for s, _ in problems) else INCONSISTENT
        return PointResult("deploy", status, "; ".join(d for _, d in problems))
    return PointResult("deploy", PRESENT, ", ".join(ok))


def _check_processors(index: TreeIndex, view: ModelView) -> PointResult:
    names = sorted({f for p in view.pipelines for s in p.stages for f in s.processors})
    if not names:
        return PointResult("processor", NA, "no stage input processor referenced")
    bad = []
    for dotted in names:
        module, _, func = dotted.rpartition(".")
        rel = _module_file(index, module)
        if rel is None or not _defines(index, rel, func):
            bad.append(dotted)
    if bad:
        return PointResult("processor", INCONSISTENT, f"referenced but not defined: {', '.join(bad)}")
    return PointResult("processor", PRESENT, f"{len(names)} function(s)")


def _check_hf_config(index: TreeIndex, view: ModelView) -> PointResult:
    types = [p.model_type for p in view.pipelines if p.model_type] + ([view.model_type] if view.model_type else [])
    hit = [t for t in dict.fromkeys(types) if t in index.hf_configs]
    if hit:
        return PointResult("hf_config", PRESENT, ", ".join(f"{t}: {index.hf_configs[t][0]}" for t in hit))
    return PointResult("hf_config", OPTIONAL, "config loaded by transformers / trust_remote_code")


def _entry(index: TreeIndex, view: ModelView) -> tuple[Stage | None, str | None, Pipeline | None]:
    for p in view.pipelines:
        stage, detected = index.entry_stage(p)
        if detected is not None or stage is not None:
            return stage, p.arch_of(stage) if stage else p.model_arch, p
    return None, None, None


def _check_serving(index: TreeIndex, view: ModelView) -> list[PointResult]:
    stage, arch, _ = _entry(index, view)
    key = stage.model_stage if stage else None
    if view.diffusion:
        detail = "pure diffusion: OmniOpenAIServingSpeech.for_diffusion() sets the type, no stage detection"
        return [PointResult(p, NA, detail) for p in index.profile.serving_points]
    out = []
    constant = index.stage_constants.get(key) if key else None
    arch_constant = index.arch_constants.get(arch) if arch else None
    if constant is None and arch_constant is not None:
        out.append(PointResult("serving.constant", PRESENT, f"{arch_constant} holds the architecture {arch!r}"))
        out.append(PointResult("serving.union", NA, f"found by architecture in _find_tts_stage() ({arch_constant})"))
    elif key is None:
        out.append(PointResult("serving.constant", MISSING, "no entry stage"))
    elif constant is None:
        out.append(PointResult("serving.constant", MISSING, f"no _X_MODEL_STAGES constant holds {key!r}"))
    else:
        out.append(PointResult("serving.constant", PRESENT, f"{constant} holds {key!r}"))
    if constant is None and arch_constant is not None:
        pass
    elif constant is None:
        out.append(PointResult("serving.union", MISSING, "no stage constant"))
    elif constant in index.union_members:
        out.append(PointResult("serving.union", PRESENT, f"{constant} in _TTS_MODEL_STAGES"))
    else:
        out.append(PointResult("serving.union", INCONSISTENT, f"{constant} is not part of _TTS_MODEL_STAGES"))
    detected = index.detect(key, arch) if key or arch else None
    if view.model_type is None:
        out.append(
            PointResult("serving.detect", MISSING, f"_detect_tts_model_type({key!r}, {arch!r}) returns {detected!r}")
        )
    elif detected == view.model_type:
        out.append(PointResult("serving.detect", PRESENT, f"({key!r}, {arch!r}) -> {detected!r}"))
    else:
        out.append(
            PointResult("serving.detect", INCONSISTENT, f"({key!r}, {arch!r}) -> {detected!r}, not {view.model_type!r}")
        )
    if index.profile.point("serving.validate"):
        methods = index.serving_methods_of(view.model_type) if view.model_type else {}
        if view.model_type == "qwen3_tts":
            out.append(PointResult("serving.validate", PRESENT, "Qwen3-TTS is the default branch"))
            out.append(PointResult("serving.build", PRESENT, "Qwen3-TTS is the generic else branch"))
        else:
            if methods.get("_validate_tts_request"):
                out.append(
                    PointResult("serving.validate", PRESENT, f"_validate_tts_request() dispatches {view.model_type!r}")
                )
            else:
                out.append(
                    PointResult(
                        "serving.validate",
                        MISSING,
                        f"{view.model_type!r} falls through to the Qwen3-TTS rules (batch endpoint)",
                    )
                )
            fish_flag = view.model_type == "fish_tts" and "self._is_fish_speech" in index.serving
            if methods.get("_prepare_speech_generation") or fish_flag:
                how = (
                    "the _is_fish_speech flag"
                    if fish_flag and not methods.get("_prepare_speech_generation")
                    else "a model-type branch"
                )
                out.append(PointResult("serving.build", PRESENT, f"_prepare_speech_generation() builds it via {how}"))
            else:
                out.append(
                    PointResult(
                        "serving.build", MISSING, f"{view.model_type!r} takes the generic Qwen3-TTS request path"
                    )
                )
    return out


def _adapter_files(index: TreeIndex) -> dict[str, str]:
    """adapter `name` -> module stem, for every adapter class in tts_adapters/*.py (listed or not)."""
    out = {}
    for path in sorted((index.root / layout.ADAPTERS).glob("*.py")):
        try:
            tree = ast.parse(index.text(f"{layout.ADAPTERS}/{path.name}"))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and any(getattr(t, "id", None) == "name" for t in stmt.targets):
                        if isinstance(stmt.value, ast.Constant):
                            out[stmt.value.value] = path.stem
    return out


def _check_adapter(index: TreeIndex, view: ModelView) -> list[PointResult]:
    era = index.profile.era
    registry = index.adapters
    adapter = registry.adapters.get(view.model_type) if view.model_type else None
    stage, arch, _ = _entry(index, view)
    key = stage.model_stage if stage else None
    out = []
    if adapter is None:
        unlisted = _adapter_files(index).get(view.model_type) if view.model_type else None
        if unlisted:
            out.append(PointResult("adapter", PRESENT, f"tts_adapters/{unlisted}.py"))
            out.append(
                PointResult(
                    "adapter_import", MISSING, f"{unlisted} is not in the import tuple of tts_adapters/__init__.py"
                )
            )
        else:
            what = view.model_type or key
            reason = (
                "served by a legacy branch of serving_speech.py"
                if era.legacy_serving_branches and view.model_type
                else "no adapter"
            )
            out.append(PointResult("adapter", MISSING, f"{reason} (for {what!r})"))
            out.append(PointResult("adapter_import", NA, "no adapter module to import"))
        out.append(PointResult("adapter.stage_keys", NA, "no adapter"))
    else:
        out.append(PointResult("adapter", PRESENT, f"{adapter.class_name} (tts_adapters/{adapter.module}.py)"))
        out.append(PointResult("adapter_import", PRESENT, f"{adapter.module} in the import tuple"))
        if view.diffusion:
            out.append(PointResult("adapter.stage_keys", NA, "pure diffusion: served without stage detection"))
        elif era.legacy_serving_branches and arch in index.arch_constants and key not in index.stage_constants:
            out.append(
                PointResult(
                    "adapter.stage_keys",
                    NA,
                    f"found by architecture ({index.arch_constants[arch]}); stage_keys are documentation in 0.24-0.26",
                )
            )
        elif key in adapter.stage_keys or (arch in adapter.model_archs):
            by = f"stage key {key!r}" if key in adapter.stage_keys else f"architecture {arch!r}"
            out.append(PointResult("adapter.stage_keys", PRESENT, f"{by} declared"))
        else:
            keys = ", ".join(sorted(adapter.stage_keys)) or "none"
            status = INCONSISTENT
            out.append(
                PointResult(
                    "adapter.stage_keys",
                    status,
                    f"entry stage {key!r} (pipeline / deploy) is not in the adapter's stage_keys ({keys})",
                )
            )
    if index.profile.point("adapter.detect"):
        if view.diffusion:
            out.append(
                PointResult(
                    "adapter.detect", NA, "pure diffusion: OmniOpenAIServingSpeech.for_diffusion() sets the type"
                )
            )
        else:
            detected = registry.detect(key, arch)
            target = view.model_type
            if target is None:
                status = MISSING if detected is None else INCONSISTENT
                out.append(
                    PointResult("adapter.detect", status, f"detect_tts_model_type({key!r}, {arch!r}) -> {detected!r}")
                )
            elif detected == target:
                out.append(PointResult("adapter.detect", PRESENT, f"({key!r}, {arch!r}) -> {detected!r}"))
            else:
                out.append(
                    PointResult("adapter.detect", INCONSISTENT, f"({key!r}, {arch!r}) -> {detected!r}, not {target!r}")
                )
    return out


def _source_names(view: ModelView) -> list[str]:
    """Folder names examples and tests of this model may use (model folder, served type, pipeline keys)."""
    names = [view.folder, view.model_type, *(p.model_type for p in view.pipelines)]
    return list(dict.fromkeys(n for n in names if n))


def _check_sources(index: TreeIndex, view: ModelView) -> list[PointResult]:
    if not index.profile.has_sources:
        return [PointResult(p, NA, "wheel: package only") for p in ("examples", "tests", "hub_readme")]
    names = _source_names(view)
    examples = []
    for kind in ("offline_inference", "online_serving"):
        found = [n for n in names if (index.root / f"examples/{kind}/text_to_speech/{n}").is_dir()]
        if found:
            examples.append(f"{kind}/text_to_speech/{found[0]}/")
    tests = sorted(
        {
            p.relative_to(index.root / "tests/e2e").as_posix()
            for n in names
            for p in (index.root / "tests/e2e").glob(f"*/test_{n}*.py")
        }
    )
    hubs = [rel for rel in (layout.OFFLINE_HUB, layout.ONLINE_HUB) if any(f"{n}/" in index.text(rel) for n in names)]

    def status(found: list, expected: int) -> str:
        return PRESENT if len(found) >= expected else MISSING if not found else INCONSISTENT

    return [
        PointResult(
            "examples", status(examples, 2), ", ".join(examples) or f"no examples/*/text_to_speech/{names[0]}/"
        ),
        PointResult("tests", status(tests, 1), ", ".join(tests) or f"no tests/e2e/*/test_{names[0]}*.py"),
        PointResult(
            "hub_readme",
            status(hubs, 2),
            f"{len(hubs)} of 2 hub READMEs link its examples"
            + (f" ({', '.join(h.split('/')[1] for h in hubs)})" if hubs else ""),
        ),
    ]


def check_view(index: TreeIndex, view: ModelView, query: str = "") -> ModelReport:
    profile = index.profile
    results: list[PointResult] = []
    folder = view.folder
    results.append(
        PointResult("package", PRESENT, f"{layout.MODELS}/{folder}/")
        if folder and (index.root / layout.MODELS / folder).is_dir()
        else PointResult("package", MISSING, "no model folder")
    )
    results.append(_check_processors(index, view))
    legacy = [p.legacy for p in view.pipelines if p.legacy]
    if view.pipelines and not legacy:
        results.append(PointResult("pipeline", PRESENT, ", ".join(p.where for p in view.pipelines)))
    elif legacy:
        results.append(
            PointResult("pipeline", MISSING, f"topology only in legacy {', '.join(legacy)} (stage_args schema)")
        )
    elif view.diffusion:
        results.append(
            PointResult("pipeline", NA, "single-stage diffusion: the engine's default diffusion stage config")
        )
    else:
        results.append(PointResult("pipeline", MISSING, "no PipelineConfig serves it"))
    results.append(_check_deploy(index, view))
    results.append(_check_registry(index, view))
    results.append(_check_pipeline_registry(index, view))
    results.append(_check_hf_config(index, view))
    # The era's points decide which checks run.
    if profile.serving_points:
        results += _check_serving(index, view)
    if profile.point("adapter"):
        results += _check_adapter(index, view)
    results += _check_sources(index, view)
    order = [p.id for p in profile.points]
    results.sort(key=lambda r: order.index(r.point) if r.point in order else len(order))
    return ModelReport(query or view.label, view, profile.era.name, profile.version, results)


def check_model(profile: LayoutProfile, name: str) -> list[ModelReport]:
    index = TreeIndex(profile)
    return [check_view(index, view, name) for view in model_views(index, name)]


def tts_candidates(index: TreeIndex) -> list[ModelView]:
    """Every served model of the tree, plus audio-only pipelines that nothing serves (the report's rows)."""
    views = []
    seen = set()
    for model_type in index.served_types() + sorted(_diffusion_types(index)):
        if model_type in seen:
            continue
        seen.add(model_type)
        views += model_views(index, model_type)
    covered = {id(p) for v in views for p in v.pipelines}
    for p in index.pipelines:
        # Audio-only pipelines no served model claims: unserved, or detected as another model's.
        if id(p) not in covered and p.audio_only:
            views.append(ModelView(None, p.folder, [p]))
    return views


def format_report(report: ModelReport) -> str:
    view = report.view
    pipes = ", ".join(p.model_type or p.var for p in view.pipelines) or "none"
    head = (
        f"{report.query}: model type {view.model_type or '(not served)'}, folder {view.folder or '?'},"
        f" pipeline(s) {pipes}"
        f" — {report.era} era, vllm-omni {report.version or '?'}"
    )
    lines = [head]
    width = max(len(r.point) for r in report.results)
    for r in report.results:
        lines.append(f"  {SYMBOL[r.status]} {r.point:<{width}}  {r.status:<17} {r.detail}")
    verdict = "complete" if report.complete else f"{len(report.gaps)} gap(s): {', '.join(g.point for g in report.gaps)}"
    lines.append(f"  => {verdict}")
    return "\n".join(lines)
