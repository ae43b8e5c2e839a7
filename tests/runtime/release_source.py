"""Compile a release's real output-consolidation code out of its source tree, without vLLM.

The release module ``engine/output_processor.py`` (``outputs/output_processor.py`` from 0.26) imports
vLLM, so it cannot be imported here. Instead we parse it with ``ast``, keep the two methods of
``OmniRequestState`` that matter (``add_multimodal_tensor`` and ``_consolidate_multimodal_tensors``) plus
the module-level helpers they use, rebase the class on ``object`` and ``exec`` the result. Names that
come from vLLM are bound to stand-ins; names that come from ``vllm_omni`` helper modules
(``output_modality``, ``mm_outputs``, ``data_entry_keys``...) are imported from the *same* release tree,
with vLLM stubbed out while they load. Nothing is copied into the repository: the code runs straight
from the release as fetched from PyPI and extracted into the cache (``omnitts.knowledge.releases``).
"""

from __future__ import annotations

import ast
import enum
import importlib
import importlib.util
import logging
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnitts.knowledge import releases


class RequestOutputKind(enum.Enum):  # stand-in for vllm.sampling_params.RequestOutputKind
    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


class _Anything:
    """Stand-in for any vLLM class or function: subclassable, callable, attribute-tolerant."""

    def __init__(self, *a, **k):
        pass

    def __init_subclass__(cls, **kwargs):
        pass

    def __call__(self, *a, **k):
        return _Anything()

    def __getattr__(self, name):
        return _Anything()


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == "init_logger":
            return logging.getLogger
        if name == "RequestOutputKind":
            return RequestOutputKind
        if name == "CompletionOutput":
            return _Anything
        return type(name, (_Anything,), {})


# vLLM itself, and third-party modules the helper modules import at top level but never use on the
# consolidation path
_STUBBED = ("vllm", "msgspec")


def _stub_vllm() -> dict[str, types.ModuleType]:
    mods: dict[str, types.ModuleType] = {}

    class _Finder:
        @staticmethod
        def find_spec(fullname, path=None, target=None):
            if fullname.split(".")[0] in _STUBBED:
                return importlib.util.spec_from_loader(fullname, _Loader(), is_package=True)
            return None

    class _Loader:
        def create_module(self, spec):
            m = _StubModule(spec.name)
            m.__path__ = []
            mods[spec.name] = m
            return m

        def exec_module(self, module):
            pass

    return mods, _Finder


@dataclass
class ReleaseConsolidation:
    version: str
    state_cls: type
    payload_cls: type | None
    source: Path


def _needed_names(nodes: list[ast.AST]) -> set[str]:
    names: set[str] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
            elif isinstance(sub, ast.Attribute):
                base = sub
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name):
                    names.add(base.id)
    return names


def load(version: str, tree: Path | None = None) -> ReleaseConsolidation:
    root = tree or releases.pristine_tree(version)  # downloads on first use; a failed download is an error
    minor = int(version.split(".")[1])
    rel = "vllm_omni/outputs/output_processor.py" if minor >= 26 else "vllm_omni/engine/output_processor.py"
    path = root / rel
    module_tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    state = next(n for n in module_tree.body if isinstance(n, ast.ClassDef) and n.name == "OmniRequestState")
    keep = {"add_multimodal_tensor", "_consolidate_multimodal_tensors", "_to_cpu"}
    state.body = [n for n in state.body if isinstance(n, ast.FunctionDef) and n.name in keep]
    state.bases, state.keywords = [], []
    funcs = [n for n in module_tree.body if isinstance(n, ast.FunctionDef)]
    assigns = [n for n in module_tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))]
    needed = _needed_names([state, *funcs, *assigns])

    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in (*_STUBBED, "vllm_omni")}
    for k in saved:
        del sys.modules[k]
    stub_mods, finder = _stub_vllm()
    sys.meta_path.insert(0, finder)
    # empty package modules so that vllm_omni/__init__.py files (which import the world) never run
    for pkg in ("vllm_omni", "vllm_omni.engine", "vllm_omni.outputs", "vllm_omni.utils"):
        m = types.ModuleType(pkg)
        m.__path__ = [str(root / pkg.replace(".", "/"))]
        sys.modules[pkg] = m
    ns: dict[str, Any] = {"__name__": f"release_{version.replace('.', '_')}_output_processor"}
    try:
        for node in module_tree.body:
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            mod = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if bound not in needed:
                    continue
                if mod and mod.startswith("vllm_omni"):
                    if (root / (mod.replace(".", "/") + ".py")).is_file() or (root / mod.replace(".", "/")).is_dir():
                        ns[bound] = getattr(importlib.import_module(mod), alias.name)
                    continue
                single = ast.Module(body=[type(node)(**{**node.__dict__, "names": [alias]})], type_ignores=[])
                exec(compile(ast.fix_missing_locations(single), str(path), "exec"), ns)
        for node in assigns:
            try:
                exec(
                    compile(ast.fix_missing_locations(ast.Module(body=[node], type_ignores=[])), str(path), "exec"), ns
                )
            except Exception:  # noqa: BLE001 - an unneeded module constant may need vLLM
                pass
        body = ast.Module(body=[*funcs, state], type_ignores=[])
        exec(compile(ast.fix_missing_locations(body), str(path), "exec"), ns)
        payload_cls = None
        if minor >= 24:
            mm_mod = "vllm_omni.outputs.mm_outputs" if minor >= 26 else "vllm_omni.engine.mm_outputs"
            payload_cls = importlib.import_module(mm_mod).MultimodalPayload
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if k.split(".")[0] in (*_STUBBED, "vllm_omni")]:
            del sys.modules[k]
        sys.modules.update(saved)
    return ReleaseConsolidation(version, ns["OmniRequestState"], payload_cls, path)
