"""Per-request state held by a model (invariant I5): the containers a model's modules hold, with their keys.

The harness lists them in the test process, omnitts's worker extension inside the engine's workers; the i5 verdicts
judge them (``validators/verdicts/i5.py``).
"""

from __future__ import annotations

import collections
import types

import torch

from omnitts.validators.observations.state import Container

_SKIP = {
    "_parameters",
    "_buffers",
    "_modules",
    "_non_persistent_buffers_set",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
    "config",
    "vllm_config",
    "training",
}
_CONTAINERS = (dict, list, set, tuple, collections.deque)


def _nbytes(v, depth=0) -> int:
    if isinstance(v, torch.Tensor):
        return v.numel() * v.element_size()
    if depth > 3:
        return 0
    if isinstance(v, dict):
        return sum(_nbytes(x, depth + 1) for x in v.values())
    if isinstance(v, (list, tuple, set, collections.deque)):
        return sum(_nbytes(x, depth + 1) for x in v)
    return 0


def _owners(model) -> list[tuple[str, object]]:
    if isinstance(model, torch.nn.Module):
        return [(f"{type(model).__name__}{'.' + n if n else ''}", m) for n, m in model.named_modules()]
    return [(type(model).__name__, model)]


def containers(models: list) -> list[Container]:
    out = []
    seen: set[int] = set()
    for i, model in enumerate(models):
        for owner_name, owner in _owners(model):
            for attr, val in vars(owner).items():
                if attr in _SKIP or not isinstance(val, _CONTAINERS) or id(val) in seen:
                    continue
                seen.add(id(val))
                path = f"stage{i}:{owner_name}.{attr}"
                keys = tuple(str(k) for k in val.keys()) if isinstance(val, dict) else ()
                out.append(Container(path, len(val), keys, _nbytes(val)))
                if isinstance(val, dict):
                    for k, sub in val.items():
                        if isinstance(sub, dict) and id(sub) not in seen:
                            seen.add(id(sub))
                            out.append(
                                Container(f"{path}[{k!r}]", len(sub), tuple(str(x) for x in sub.keys()), _nbytes(sub))
                            )
    return out


_OPAQUE = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType, str, bytes)


def held_bytes(models: list, limit: int = 200_000) -> int:
    """Bytes of the tensors a model reaches beyond its parameters and buffers: its containers, the objects in them,
    a generator's frame (per-request caches live there). Walked with the garbage collector's referents from every
    module's own attributes, stopping at modules, functions, classes and module namespaces (which reach the whole
    process); storages counted once."""
    import gc
    import sys

    weights, roots = set(), []
    for model in models:
        owners = [m for _, m in model.named_modules()] if isinstance(model, torch.nn.Module) else [model]
        for owner in owners:
            if isinstance(owner, torch.nn.Module):
                for t in [*owner.parameters(recurse=False), *owner.buffers(recurse=False)]:
                    weights.add(_storage(t))
            roots += [v for k, v in vars(owner).items() if k not in _SKIP]
    namespaces = {id(vars(m)) for m in list(sys.modules.values()) if m is not None}
    seen, stack, total, counted = set(), list(roots), 0, set()
    while stack and len(seen) < limit:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (*_OPAQUE, torch.nn.Module)) or id(obj) in namespaces:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            key = _storage(obj)
            if key not in weights and key not in counted:
                counted.add(key)
                total += obj.untyped_storage().nbytes()
            continue
        stack.extend(gc.get_referents(obj))
    return total


def _storage(t: torch.Tensor) -> tuple[str, int]:
    return str(t.device), t.untyped_storage().data_ptr()
