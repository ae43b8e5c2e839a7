"""Execute a tree's own TTS model-type detection over its (patched) source, without importing it.

`serving_speech.py` cannot be imported without a GPU platform, so the detection method is compiled
out of the parsed module together with the module-level stage constants it reads, and called with a
minimal stand-in `self` (0.18-0.26: `_detect_tts_model_type`). In the adapter era (0.28+) detection
is the registry of `tts_adapters/`: `compile_adapter_registry` compiles the registry functions of its
`__init__.py` (`detect_tts_model_type`, `all_tts_stage_keys`, ...) with the detection surface of every
adapter class its import tuple registers. Used by tests and by `check` to prove that a new stage key
resolves to the new model type while every old key keeps its type.
"""

from __future__ import annotations
import __future__

import ast
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

CLASS = "OmniOpenAIServingSpeech"
METHOD = "_detect_tts_model_type"


def _stage(model_stage: str | None, model_arch: str | None) -> SimpleNamespace:
    return SimpleNamespace(engine_args=SimpleNamespace(model_stage=model_stage, model_arch=model_arch))


def compile_detector(source: str) -> Callable[[str | None, str | None], str | None]:
    """`detect(model_stage, model_arch)` running the module's own `_detect_tts_model_type`."""
    tree = ast.parse(source)
    namespace: dict = {}
    constants = []
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id.endswith(("_MODEL_STAGES", "_MODEL_ARCHS")) for t in targets):
            constants.append(node)
    exec(compile(ast.Module(body=constants, type_ignores=[]), "<constants>", "exec"), namespace)  # noqa: S102
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS)
    method = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == METHOD)
    method.decorator_list = []
    exec(compile(ast.Module(body=[method], type_ignores=[]), f"<{METHOD}>", "exec"), namespace)  # noqa: S102
    function = namespace[METHOD]

    def detect(model_stage: str | None, model_arch: str | None = None) -> str | None:
        stage = _stage(model_stage, model_arch)
        fake_self = SimpleNamespace(
            _tts_stage=stage, engine_client=SimpleNamespace(stage_configs=[stage], stage_list=[stage])
        )
        return function(fake_self)

    return detect


def stage_keys(source: str) -> set[str]:
    """Every stage key named in a module-level `_X_MODEL_STAGES` set literal."""
    keys: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Set):
            if any(isinstance(t, ast.Name) and t.id.endswith("_MODEL_STAGES") for t in node.targets):
                keys |= {e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return keys


def arch_literals(source: str) -> list[str]:
    """Architecture-like string constants the detection method compares against (e.g. "CovoAudio")."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS)
    method = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == METHOD)
    found = {
        n.value
        for n in ast.walk(method)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value[:1].isupper()
    }
    return sorted(found)


def known_detections(source: str) -> dict[tuple[str, str | None], str]:
    """(stage key, arch or None) -> model type, for every stage key the module declares."""
    detect = compile_detector(source)
    archs = [None, *arch_literals(source)]
    result = {}
    for key in sorted(stage_keys(source)):
        for arch in archs:
            model_type = detect(key, arch)
            if model_type is not None:
                result[(key, arch)] = model_type
    return result


# -- adapter era (0.24+): the adapter registry of `tts_adapters/` -------------------------------------
ADAPTERS_PACKAGE = "vllm_omni.entrypoints.openai.tts_adapters"
_DETECTION_METHODS = {"matches", "stage_serves_speech"}
_REGISTRY_FUNCTIONS = {
    "register_tts_adapter",
    "all_tts_model_types",
    "resolve_adapter",
    "iter_tts_detectors",
    "detect_tts_model_type",
    "all_tts_stage_keys",
    "tts_entry_stage_archs",
}


@dataclass
class AdapterInfo:
    """What one registered adapter class declares (read by executing its class body's attributes)."""

    name: str
    module: str
    class_name: str
    stage_keys: frozenset[str]
    model_archs: frozenset[str]
    detect_priority: int | None
    arch_identifies_entry_stage: bool


@dataclass
class AdapterRegistry:
    """The tree's own adapter registry, compiled out of its sources (no vllm / torch import)."""

    adapters: dict[str, AdapterInfo]
    imported_modules: list[str]
    namespace: dict

    def detect(self, model_stage: str | None, model_arch: str | None = None) -> str | None:
        """`detect_tts_model_type()` of 0.28+; None in 0.24-0.26, where detection lives in serving_speech.py."""
        function = self.namespace.get("detect_tts_model_type")
        return function(model_stage, model_arch) if function else None

    @property
    def has_detection(self) -> bool:
        return "detect_tts_model_type" in self.namespace

    def all_stage_keys(self) -> frozenset[str]:
        function = self.namespace.get("all_tts_stage_keys")
        if function:
            return function()
        return frozenset(k for a in self.adapters.values() for k in a.stage_keys)

    def owners(self, stage_key: str) -> list[AdapterInfo]:
        return [a for a in self.adapters.values() if stage_key in a.stage_keys]


def _strip_annotations(node: ast.stmt) -> ast.stmt | None:
    """Class-body `x: T = v` -> `x = v` (annotations may name things we do not compile); bare `x: T` -> None."""
    if isinstance(node, ast.AnnAssign):
        if node.value is None or not isinstance(node.target, ast.Name):
            return None
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)
    return node


def _guarded(stmt: ast.stmt) -> ast.stmt:
    """`try: stmt / except Exception: pass`: an attribute that needs what we did not compile is skipped."""
    handler = ast.ExceptHandler(type=ast.Name("Exception", ast.Load()), name=None, body=[ast.Pass()])
    return ast.copy_location(ast.Try(body=[stmt], handlers=[handler], orelse=[], finalbody=[]), stmt)


def _detection_class(node: ast.ClassDef, known: set[str], fallback: str, keep_decorators: bool) -> ast.ClassDef:
    body: list[ast.stmt] = []
    for stmt in node.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            plain = _strip_annotations(stmt)
            if plain is not None and all(isinstance(t, ast.Name) for t in plain.targets):
                body.append(_guarded(plain))
        elif isinstance(stmt, ast.FunctionDef) and stmt.name in _DETECTION_METHODS:
            body.append(stmt)
    bases = []
    for base in node.bases:
        name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
        if name in known:
            bases.append(ast.Name(name, ast.Load()))
    if not bases and node.name != fallback:
        bases = [ast.Name(fallback, ast.Load())]
    decorators = []
    if keep_decorators:
        for dec in node.decorator_list:
            name = dec.id if isinstance(dec, ast.Name) else dec.attr if isinstance(dec, ast.Attribute) else None
            if name == "register_tts_adapter":
                decorators.append(ast.Name("register_tts_adapter", ast.Load()))
    cls = ast.ClassDef(
        name=node.name, bases=bases, keywords=[], body=body or [ast.Pass()], decorator_list=decorators, type_params=[]
    )
    return ast.copy_location(cls, node)


def _exec(body: list[ast.stmt], filename: str, namespace: dict) -> None:
    module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    code = compile(module, filename, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    exec(code, namespace)  # noqa: S102


def compile_adapter_registry(sources: dict[str, str]) -> AdapterRegistry:
    """Run the tree's registry functions over its adapter classes.

    `sources` maps module stems of `tts_adapters/` ("__init__", "base", "qwen3_tts", ...) to their text
    (patched text included), so that a plan can be checked before it is written. Only the detection
    surface is compiled: class attributes (`name`, `stage_keys`, `model_archs`, `detect_priority`,
    `arch_identifies_entry_stage`), the `matches` / `stage_serves_speech` classmethods, the registry
    functions of `__init__.py` and its import tuple (which decides which modules register).
    """
    namespace: dict = {"__name__": ADAPTERS_PACKAGE}
    init = ast.parse(sources["__init__"])
    base = ast.parse(sources.get("base", ""))
    base_classes = [
        n
        for n in base.body
        if isinstance(n, ast.ClassDef) and n.name in {"TTSModelAdapter", "ARTTSAdapter", "DiffusionTTSAdapter"}
    ]
    known = {"TTSModelAdapter"}
    compiled = []
    for cls in base_classes:
        compiled.append(_detection_class(cls, known, "TTSModelAdapter", keep_decorators=False))
        known.add(cls.name)
    if "TTSModelAdapter" not in known or not base_classes:
        compiled.insert(0, ast.parse("class TTSModelAdapter:\n    stage_keys = frozenset()\n").body[0])
    _exec(compiled, "<tts_adapters/base.py>", namespace)

    registry_body = []
    for node in init.body:
        if isinstance(node, ast.FunctionDef) and node.name in _REGISTRY_FUNCTIONS:
            registry_body.append(node)
        elif "TTS_ADAPTER_REGISTRY" in [
            t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)
        ]:
            registry_body.append(_strip_annotations(node))
    registry_body.append(ast.parse("logger = None").body[0])
    _exec(registry_body, "<tts_adapters/__init__.py>", namespace)

    imported = []
    for node in init.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == ADAPTERS_PACKAGE:
            imported += [a.name for a in node.names]
    adapters: dict[str, AdapterInfo] = {}
    for stem in imported:
        text = sources.get(stem)
        if text is None:
            continue  # listed but missing: `check` reports it
        tree = ast.parse(text)
        body: list[ast.stmt] = []
        module_known = set(known)
        for node in tree.body:
            if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets):
                body.append(_guarded(node))  # module constants an attribute may use
            elif isinstance(node, ast.ClassDef):
                body.append(_detection_class(node, module_known, "TTSModelAdapter", keep_decorators=True))
                module_known.add(node.name)
        before = dict(namespace["TTS_ADAPTER_REGISTRY"])
        module_ns = dict(namespace)
        _exec(body, f"<tts_adapters/{stem}.py>", module_ns)
        for name, cls in module_ns["TTS_ADAPTER_REGISTRY"].items():
            if name in before:
                continue
            adapters[name] = AdapterInfo(
                name=name,
                module=stem,
                class_name=cls.__name__,
                stage_keys=frozenset(getattr(cls, "stage_keys", frozenset())),
                model_archs=frozenset(getattr(cls, "model_archs", frozenset())),
                detect_priority=getattr(cls, "detect_priority", None),
                arch_identifies_entry_stage=bool(getattr(cls, "arch_identifies_entry_stage", False)),
            )
        namespace["TTS_ADAPTER_REGISTRY"].update(module_ns["TTS_ADAPTER_REGISTRY"])
    return AdapterRegistry(adapters=adapters, imported_modules=imported, namespace=namespace)


def read_adapter_sources(adapters_dir) -> dict[str, str]:
    """Every `tts_adapters/*.py` of a tree, by module stem."""
    from pathlib import Path

    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(Path(adapters_dir).glob("*.py"))}
