"""Host copies: what crosses the worker -> engine process boundary, with one stream sync per step on CUDA.

The release's runner copies each output of a step to the host once (``utils/mm_outputs.build_mm_cpu``) and waits
once per step. ``fresh`` maps ``id(tensor)`` to host tensors a step copied privately, so they are not copied twice.
"""

from __future__ import annotations

from typing import Any

import torch


def to_host(x: Any, fresh: dict[int, torch.Tensor] | None = None) -> Any:
    """What crosses the worker -> engine process boundary: fresh CPU copies. ``fresh`` holds the tensors the step
    already copied privately (host copies of device outputs, cloned list items): those are not copied twice."""
    if isinstance(x, torch.Tensor):
        if fresh is not None and fresh.get(id(x)) is x:
            return x
        if x.device.type == "cpu":
            return x.detach().clone(memory_format=torch.contiguous_format)
        return x.detach().to("cpu").contiguous()
    if isinstance(x, dict):
        return {k: to_host(v, fresh) for k, v in x.items()}
    if isinstance(x, list):
        return [to_host(v, fresh) for v in x]
    return x


def d2h(t: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """One device->host copy (none for host tensors). ``non_blocking`` queues it into pinned memory: it is readable
    after the step's single stream sync (:func:`sync`), as the runner waits once per step, not once per tensor."""
    t = t.detach()
    if t.device.type == "cpu":
        return t
    if non_blocking:
        return t.contiguous().to("cpu", non_blocking=True)  # contiguous on the device: no host pass before the sync
    return t.to("cpu")


def h2d(data: list, device: str) -> torch.Tensor:
    """A long tensor on ``device``; on CUDA staged through pinned memory so the copy does not wait for the GPU (a
    copy from pageable memory synchronises the stream first)."""
    host = torch.tensor(data, dtype=torch.long)
    if device == "cpu":
        return host
    if str(device).startswith("cuda"):
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


def sync(device: str) -> None:
    """The step's one host sync: every copy queued with ``non_blocking`` is readable after it."""
    if str(device).startswith("cuda"):
        torch.cuda.current_stream(torch.device(device)).synchronize()


def batch_to_host(x: Any, non_blocking: bool = False) -> Any:
    """``utils/mm_outputs.build_mm_cpu`` for one value (no copy for tensors already on the host)."""
    if isinstance(x, torch.Tensor):
        return d2h(x, non_blocking)
    if isinstance(x, dict):
        return {str(k): d2h(v, non_blocking) for k, v in x.items() if isinstance(v, torch.Tensor)}
    if isinstance(x, list):
        return [d2h(v, non_blocking) if isinstance(v, torch.Tensor) else v for v in x]
    return x


def mark_fresh(fresh: dict[int, torch.Tensor], x: Any) -> Any:
    """Record the tensors in ``x`` as private host copies of this step (see :func:`to_host`); returns ``x``."""
    if isinstance(x, torch.Tensor):
        fresh[id(x)] = x
    elif isinstance(x, dict):
        for v in x.values():
            mark_fresh(fresh, v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            mark_fresh(fresh, v)
    return x


def host_copies_per_request(per_req: list[Any], device: str, fresh: dict[int, torch.Tensor]) -> list[Any]:
    """The generation stage's outputs on the host, copied once per tensor with one sync; a copy that only one request
    holds is private to it (marked fresh, not copied again), one shared by several requests is copied per request."""
    copied: dict[int, list] = {}  # id(device tensor) -> [host copy, number of requests holding it]

    def host(v):
        if isinstance(v, torch.Tensor):
            entry = copied.setdefault(id(v), [None, 0])
            if entry[0] is None:
                entry[0] = d2h(v, non_blocking=True)
            entry[1] += 1
            return entry[0]
        if isinstance(v, dict):
            return {k: host(x) for k, x in v.items()}
        if isinstance(v, list):
            return [host(x) for x in v]
        return v

    out = [host(p) for p in per_req]
    sync(device)
    mark_fresh(fresh, [host_copy for host_copy, holders in copied.values() if holders == 1])
    return out


def misplaced(x: Any, expected: str, where: str, *, host_ok: bool = False) -> list[str]:
    """Tensors in ``x`` (nested dicts, lists, tuples) that are not on device ``expected``, one line each.

    ``expected`` is a stage's device ("cuda:1"), or "cpu" for what crosses to the next stage (the release's
    connector serialises every tensor of a chunk to the host: ``omni_connectors/utils/serialization.py``
    ``_encode_tensor``). ``host_ok``: host tensors are fine too (a stage's small metadata such as ``sr``).
    """
    want = torch.device(expected)
    found: list[str] = []

    def walk(v: Any, name: str) -> None:
        if isinstance(v, torch.Tensor):
            dev = v.device
            same = dev.type == want.type and (want.index is None or dev.index in (None, want.index))
            if not same and not (host_ok and dev.type == "cpu"):
                found.append(f"{where}: {name or 'value'} is on {dev}, expected {want}")
        elif isinstance(v, dict):
            for k, item in v.items():
                walk(item, f"{name}.{k}" if name else str(k))
        elif isinstance(v, (list, tuple)):
            for i, item in enumerate(v):
                walk(item, f"{name}[{i}]")

    walk(x, "")
    return found


def delivered(x: Any) -> Any:
    """``x`` as the next stage receives it through the release's connector: device tensors copied to the host (the
    serialiser's ``.detach().cpu()``), host tensors and other values unchanged."""
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu") if x.device.type != "cpu" else x
    if isinstance(x, dict):
        return {k: delivered(v) for k, v in x.items()}
    if isinstance(x, list):
        return [delivered(v) for v in x]
    if isinstance(x, tuple):
        return tuple(delivered(v) for v in x)
    return x
