"""Per-request state held by a model (invariant I5): find containers that remember requests."""

from __future__ import annotations

import collections
from dataclasses import dataclass

import torch

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


@dataclass
class Container:
    path: str
    size: int
    keys: list[str]
    nbytes: int


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
                keys = [str(k) for k in val.keys()] if isinstance(val, dict) else []
                out.append(Container(path, len(val), keys, _nbytes(val)))
                if isinstance(val, dict):
                    for k, sub in val.items():
                        if isinstance(sub, dict) and id(sub) not in seen:
                            seen.add(id(sub))
                            out.append(
                                Container(f"{path}[{k!r}]", len(sub), [str(x) for x in sub.keys()], _nbytes(sub))
                            )
    return out


def holders(models: list, ids: dict[str, str]) -> list[str]:
    """Containers whose keys mention a request id; ``ids`` maps id -> description (e.g. 'scheduler id of req-1')."""
    return holders_in(containers(models), ids)


def holders_in(found_containers: list[Container], ids: dict[str, str]) -> list[str]:
    """:func:`holders` over containers already listed (the engine tier lists them inside the worker)."""
    found = []
    for c in found_containers:
        for k in c.keys:
            for rid, desc in ids.items():
                if rid == k or (len(rid) > 6 and rid in k):
                    found.append(f"{c.path} still holds {k!r} ({desc})")
    return found


def footprint(models: list) -> dict[str, tuple[int, int]]:
    return footprint_of(containers(models))


def footprint_of(found_containers: list[Container]) -> dict[str, tuple[int, int]]:
    return {c.path: (c.size, c.nbytes) for c in found_containers}


def growth(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    grew = []
    for path, (size, nbytes) in after.items():
        s0, b0 = before.get(path, (0, 0))
        if size > s0 or nbytes > b0:
            grew.append(f"{path}: {s0} -> {size} entries, {b0} -> {nbytes} tensor bytes")
    return grew
