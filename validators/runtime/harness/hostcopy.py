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
