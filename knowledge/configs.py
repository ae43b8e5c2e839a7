"""Readers of a tree's declared configuration: the `_OMNI_MODELS` / pipeline registries, pipeline.py
`PipelineConfig` literals (0.20+), deploy YAMLs (with `base_config` inheritance) and legacy `stage_args`
YAMLs (0.14-0.24). The located readers keep the source line of every field so that findings point at
the right line; `read_pipeline` / `read_registry` give plain values (the runtime loader). All literals go
through `omnitts.knowledge.literals`."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from omnitts.knowledge.layout import DEPLOY, MODELS, STAGE_CONFIGS
from omnitts.knowledge.literals import call_kwargs, dotted, evaluate, module_constants
from omnitts.knowledge.treefacts import TreeContext

__all__ = ["DEPLOY", "MODELS", "STAGE_CONFIGS"]


@dataclass
class Located:
    value: object
    line: int


@dataclass
class Stage:
    stage_id: int
    fields: dict[str, Located] = field(default_factory=dict)
    line: int = 1

    def get(self, key: str, default=None):
        loc = self.fields.get(key)
        return default if loc is None else loc.value

    def line_of(self, key: str) -> int:
        loc = self.fields.get(key)
        return loc.line if loc is not None else self.line


@dataclass
class Pipeline:
    path: str  # pipeline.py, relative to the tree root
    var: str
    model_type: str
    stages: list[Stage]
    line: int
    default_deploy: str | None = None


@dataclass
class Config:
    """A deploy or legacy stage config, merged over its base_config."""

    path: str
    legacy: bool
    top: dict[str, Located]
    stages: dict[int, Stage]
    connectors: set[str] = field(default_factory=set)


# --- YAML with line numbers ---------------------------------------------------------------------
def _yaml():
    import yaml

    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*)$")
_FLOAT = re.compile(r"[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+]?[0-9]+)?$|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$")


def _plain(tag: str, value: str):
    """A resolved YAML scalar (the composer already resolved the tag; one loader per scalar is slow)."""
    if tag.endswith(":str"):
        return value
    if tag.endswith(":null"):
        return None
    if tag.endswith(":bool"):
        return value.lower() in ("true", "yes", "on")
    if tag.endswith(":int") and _INT.match(value):
        return int(value.replace("_", ""))
    if tag.endswith(":float") and _FLOAT.match(value):
        return float(value.replace("_", ""))
    return value


def _to_py(node):
    yaml, _ = _yaml()
    if isinstance(node, yaml.MappingNode):
        return {_to_py(k): _to_py(v) for k, v in node.value}
    if isinstance(node, yaml.SequenceNode):
        return [_to_py(v) for v in node.value]
    return _plain(node.tag, node.value)


def _scalar(node):
    return _to_py(node)


def _mapping(node) -> dict[str, tuple[object, object]]:
    """key -> (value node, key node)"""
    yaml, _ = _yaml()
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: (v, k) for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def load_config(ctx: TreeContext, rel: str, _depth: int = 0) -> Config | None:
    yaml, loader = _yaml()
    text = ctx.read(rel)
    try:
        root = yaml.compose(text, Loader=loader)
    except yaml.YAMLError:
        return None
    top = _mapping(root)
    legacy = "stage_args" in top
    base: Config | None = None
    if "base_config" in top and _depth < 4:
        name = str(_scalar(top["base_config"][0]))
        cand = (Path(rel).parent / name).as_posix()
        if not (ctx.root / cand).is_file():
            cand = f"{ctx.dir('deploy')}/{name}"
        base = load_config(ctx, cand, _depth + 1) if (ctx.root / cand).is_file() else None
    cfg = Config(rel, legacy, {}, {})
    if base is not None:
        cfg.top = dict(base.top)
        cfg.stages = {k: Stage(v.stage_id, dict(v.fields), v.line) for k, v in base.stages.items()}
        cfg.connectors = set(base.connectors)
    for key, (vnode, knode) in top.items():
        if key in ("stages", "stage_args", "platforms"):
            continue
        cfg.top[key] = Located(_scalar(vnode) if key != "connectors" else None, knode.start_mark.line + 1)
        if key == "connectors":
            cfg.connectors |= set(_mapping(vnode))
        if key == "runtime":  # legacy: runtime.connectors
            cfg.connectors |= set(_mapping(_mapping(vnode).get("connectors", (None,))[0]))
    seq = top.get("stage_args" if legacy else "stages")
    for item in getattr(seq[0], "value", []) if seq else []:
        fields: dict[str, Located] = {}
        for key, (vnode, knode) in _mapping(item).items():
            if key in ("engine_args", "runtime") and legacy:
                for k2, (v2, kn2) in _mapping(vnode).items():
                    fields[k2 if key == "engine_args" else f"runtime.{k2}"] = Located(
                        _scalar(v2), kn2.start_mark.line + 1
                    )
                continue
            fields[key] = Located(_scalar(vnode), knode.start_mark.line + 1)
        sid = fields.get("stage_id")
        try:
            stage_id = int(sid.value) if sid is not None else len(cfg.stages)
        except (TypeError, ValueError):
            stage_id = len(cfg.stages)
        stage = cfg.stages.get(stage_id) or Stage(stage_id, {}, item.start_mark.line + 1)
        stage.fields.update(fields)
        stage.line = item.start_mark.line + 1
        cfg.stages[stage_id] = stage
    return cfg


# --- pipeline.py ------------------------------------------------------------------------------
def _literal(node: ast.AST, consts: dict):
    return evaluate(node, consts, unknown=None)


def parse_pipelines(ctx: TreeContext, rel: str) -> list[Pipeline]:
    text = ctx.read(rel)
    if "PipelineConfig" not in text:
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    consts = module_constants(tree)
    named: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            named[node.targets[0].id] = node.value
    out = []
    for var, value in named.items():
        if not (isinstance(value, ast.Call) and dotted(value.func).split(".")[-1] == "PipelineConfig"):
            continue
        kw = {k.arg: k.value for k in value.keywords if k.arg}
        stages_node = kw.get("stages")
        if isinstance(stages_node, ast.Name):
            stages_node = named.get(stages_node.id)
        stages = []
        for i, call in enumerate(getattr(stages_node, "elts", []) or []):
            if isinstance(call, ast.Name):
                call = named.get(call.id)
            if not (isinstance(call, ast.Call) and dotted(call.func).split(".")[-1] == "StagePipelineConfig"):
                continue
            fields = {k.arg: Located(_literal(k.value, consts), k.value.lineno) for k in call.keywords if k.arg}
            sid = fields.get("stage_id")
            stages.append(Stage(int(sid.value) if sid and isinstance(sid.value, int) else i, fields, call.lineno))
        mt = _literal(kw["model_type"], consts) if "model_type" in kw else None
        dd = _literal(kw["default_deploy_config_name"], consts) if "default_deploy_config_name" in kw else None
        out.append(Pipeline(rel, var, str(mt or var.lower()), stages, value.lineno, dd))
    return out


def all_pipelines(ctx: TreeContext) -> list[Pipeline]:
    def build():
        out = []
        for p in sorted((ctx.root / ctx.dir("models")).glob("*/pipeline.py")):
            out.extend(parse_pipelines(ctx, ctx.rel(p)))
        return out

    return ctx.memo("pipelines", build)


def config_files(ctx: TreeContext) -> list[str]:
    def build():
        out = []
        for d in (ctx.dir("deploy"), ctx.dir("stage_configs")):
            for p in sorted((ctx.root / d).glob("*.yaml")) + sorted((ctx.root / d).glob("*.yml")):
                out.append(ctx.rel(p))
        return out

    return ctx.memo("config_files", build)


def pipeline_for(ctx: TreeContext, cfg_rel: str, cfg: Config) -> Pipeline | None:
    """The pipeline a deploy YAML configures: its `pipeline:` key, a pipeline naming it as default,
    or the pipeline whose model_type equals the file stem (or a prefix of it: `qwen3_tts_mrv2`)."""
    pipes = all_pipelines(ctx)
    name = Path(cfg_rel).name
    stem = Path(cfg_rel).stem
    key = cfg.top.get("pipeline")
    if key is not None:
        found = [p for p in pipes if p.model_type == key.value]
        if found:
            return found[0]
    found = [p for p in pipes if p.default_deploy == name] or [p for p in pipes if p.model_type == stem]
    if found:
        return found[0]
    prefixed = sorted((p for p in pipes if stem.startswith(p.model_type + "_")), key=lambda p: -len(p.model_type))
    return prefixed[0] if prefixed else None


def processor_exists(ctx: TreeContext, dotted_path: str) -> bool:
    module, _, func = str(dotted_path).rpartition(".")
    if not module:
        return False
    rel = module.replace(".", "/")
    if ctx.standalone and "stage_input_processors" in rel:
        rel = "stage_input_processors/" + rel.split("stage_input_processors/", 1)[1]
    for cand in (f"{rel}.py", f"{rel}/__init__.py"):
        text = ctx.read(cand)
        if text:
            return f"def {func}(" in text or f"{func} =" in text
    return False


# --- registries and plain pipeline values -------------------------------------------------------
def module_assignment(tree: ast.Module, name: str) -> ast.stmt | None:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    return None


def dict_entries(node: ast.stmt) -> dict[str, tuple[str, ...] | str | None]:
    """key -> (str, ...) for tuple values, the name for `KEY: VAR` values, None for anything else."""
    out: dict[str, tuple[str, ...] | str | None] = {}
    for key, value in zip(node.value.keys, node.value.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        if isinstance(value, ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
        ):
            out[key.value] = tuple(e.value for e in value.elts)
        elif isinstance(value, ast.Name):
            out[key.value] = value.id
        else:
            out[key.value] = None
    return out


def registry_entries(source: str, dict_name: str) -> dict[str, tuple[str, ...] | str | None]:
    """Entries of the module-level dict `dict_name` (`_OMNI_MODELS`, `_OMNI_PIPELINES`, `OMNI_PIPELINES`,
    `_DIFFUSION_MODELS`) in `source`, read with `ast`."""
    node = module_assignment(ast.parse(source), dict_name)
    if node is None or not isinstance(node.value, ast.Dict):
        return {}
    return dict_entries(node)


def read_registry(path: Path) -> dict[str, tuple[str, ...]] | None:
    """`_OMNI_MODELS` of a registry.py: architecture -> (folder, module, class); None when it has none."""
    source = path.read_text(encoding="utf-8")
    if module_assignment(ast.parse(source), "_OMNI_MODELS") is None:
        return None
    return {k: v for k, v in registry_entries(source, "_OMNI_MODELS").items() if isinstance(v, tuple)}


def read_pipeline(path: Path) -> dict | None:
    """The first `PipelineConfig(...)` of a pipeline.py as plain values, its stages under "stages" (a kwarg
    that is not a literal stays its `ast` node); None when the file has none."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    consts = module_constants(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "PipelineConfig":
            top = call_kwargs(node, consts)
            st_node = next((k.value for k in node.keywords if k.arg == "stages"), None)
            top["stages"] = [call_kwargs(el, consts) for el in getattr(st_node, "elts", []) if isinstance(el, ast.Call)]
            return top
    return None


# --- per-stage devices --------------------------------------------------------------------------
def deploy_stage_devices(deploy: dict | None, num_stages: int) -> list[str | None]:
    """Each stage's ``devices`` of a deploy config (plain values, as ``yaml.safe_load`` gives them), None where unset.

    0.30.0 ``config/stage_config.py`` ``_parse_stage_deploy``: ``runtime.devices`` wins over a flat ``devices`` on
    the stage entry; legacy ``stage_args`` YAMLs (0.14-0.24) only have ``runtime.devices``. Values are logical
    indices into the visible devices ("0", "1", "0,1"; an int is one index), mapped through
    ``CUDA_VISIBLE_DEVICES`` by ``entrypoints/stage_utils.set_stage_devices``.
    """
    out: list[str | None] = [None] * num_stages
    if not isinstance(deploy, dict):
        return out
    entries = deploy.get("stages") if "stages" in deploy else deploy.get("stage_args")
    for position, entry in enumerate(entries if isinstance(entries, list) else []):
        if not isinstance(entry, dict):
            continue
        try:
            stage_id = int(entry.get("stage_id", position))
        except (TypeError, ValueError):
            continue
        runtime = entry.get("runtime") if isinstance(entry.get("runtime"), dict) else {}
        value = runtime.get("devices", entry.get("devices"))
        if 0 <= stage_id < num_stages and value is not None:
            out[stage_id] = str(value)
    return out


def tree_model_deploy(root: Path, model: str) -> tuple[dict | None, int]:
    """(deploy config as plain values or None, number of stages) of ``model`` in the vLLM-Omni tree at ``root``: the
    stages of its pipeline.py, the deploy YAML named after the pipeline's ``model_type``."""
    pipeline = root / MODELS / model / "pipeline.py"
    pipe = read_pipeline(pipeline) if pipeline.is_file() else None
    model_type = str((pipe or {}).get("model_type") or model)
    stages = len((pipe or {}).get("stages") or []) or 1
    deploy_path = root / DEPLOY / f"{model_type}.yaml"
    if not deploy_path.is_file():
        return None, stages
    import yaml

    loaded = yaml.safe_load(deploy_path.read_text(encoding="utf-8"))
    return (loaded if isinstance(loaded, dict) else None), stages
