"""Execute a tree's own TTS model-type detection over its (patched) source, without importing it.

`serving_speech.py` cannot be imported without a GPU platform, so the detection method is compiled
out of the parsed module together with the module-level stage constants it reads, and called with a
minimal stand-in `self`. Used by tests and by integration checks to prove that a new stage key
resolves to the new model type while every old key keeps its type.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
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
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
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
        fake_self = SimpleNamespace(_tts_stage=stage, engine_client=SimpleNamespace(stage_configs=[stage], stage_list=[stage]))
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
    found = {n.value for n in ast.walk(method) if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value[:1].isupper()}
    return sorted(found)


def known_detections(source: str) -> dict[tuple[str, str | None], str]:
    """(stage key, arch or None) -> model type, for every stage key the module declares."""
    detect = compile_detector(source)
    result = {}
    for key in sorted(stage_keys(source)):
        for arch in [None, *arch_literals(source)]:
            model_type = detect(key, arch)
            if model_type is not None:
                result[(key, arch)] = model_type
    return result
