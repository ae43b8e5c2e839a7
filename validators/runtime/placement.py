"""Where checks run: which GPU an xdist worker owns, how much of it, and which device each stage gets.

pytest-xdist distributes the checks (models grouped per worker with ``--dist loadgroup``); this module only
decides placement, from plain values, so that it is testable with fake device lists:

- a worker ``gwN`` owns GPU ``gpus[N % len(gpus)]`` (round-robin over the visible devices, or a ``--gpus``
  list); workers that share a GPU each get an equal share of its memory;
- a multi-stage model's stages go where its deploy config's per-stage ``devices`` say, read as indices into
  the GPUs the run may use (the way vLLM-Omni's ``*_2gpu.yaml`` deploy files put the talker on "0" and the
  decoder on "1"); ``split_stages`` (``--stage-devices split``, the default with two or more GPUs) spreads the
  stages over two GPUs even when the deploy file keeps them together, which is where cross-device payload bugs
  show up (the harness then runs stage ``k`` on its device, with that device current during the stage's calls,
  as the release's per-stage process has it).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

_WORKER = re.compile(r"^gw(\d+)$")
# what a check may use of a GPU when it is alone on it (the rest: CUDA context, allocator slack, other tools)
_FULL_SHARE = 0.9


class PlacementError(ValueError):
    """Bad placement input (a ``--gpus`` list, a deploy ``devices`` entry): one line for the user."""


def parse_gpus(spec: str | None, visible: int) -> list[int]:
    """The GPU indices a run may use: ``--gpus 0,2`` (checked against ``visible``), or all visible ones."""
    if spec is None or spec.strip() == "":
        if visible < 1:
            raise PlacementError("--device cuda needs a CUDA device, and none is visible")
        return list(range(visible))
    gpus: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part.isdigit():
            raise PlacementError(f"--gpus {spec!r}: {part!r} is not a GPU index (expected e.g. --gpus 0,1)")
        index = int(part)
        if index >= visible:
            raise PlacementError(f"--gpus {spec!r}: GPU {index} is not visible ({visible} visible)")
        if index in gpus:
            raise PlacementError(f"--gpus {spec!r}: GPU {index} is listed twice")
        gpus.append(index)
    return gpus


def worker_index(worker_id: str | None) -> int:
    """0-based index of an xdist worker (``gw3`` -> 3); the single process of a run without xdist is 0."""
    if worker_id in (None, "", "master"):
        return 0
    match = _WORKER.match(worker_id)
    if not match:
        raise PlacementError(f"unexpected xdist worker id {worker_id!r}")
    return int(match.group(1))


@dataclass(frozen=True)
class WorkerPlacement:
    worker: str  # xdist worker id, "master" without xdist
    gpu: int  # the GPU the worker's checks run on
    sharing: int  # workers on that GPU (this one included)
    memory_fraction: float  # torch.cuda.set_per_process_memory_fraction for this worker
    gpus: tuple[int, ...]  # every GPU the run may use (stage splitting picks from these)
    split_stages: bool = False  # a two-stage model's stages go to different GPUs (two or more GPUs)

    @property
    def device(self) -> str:
        return f"cuda:{self.gpu}"

    @property
    def memory_fractions(self) -> dict[int, float]:
        """GPU -> torch.cuda.set_per_process_memory_fraction of this worker (every GPU when stages are split)."""
        if self.split_stages:
            return {g: self.memory_fraction for g in self.gpus}
        return {self.gpu: self.memory_fraction}

    def stage_devices(self, deploy_devices: Sequence[str | None]) -> list[str]:
        """Where this worker runs each stage of a model whose deploy config says ``deploy_devices``."""
        return stage_devices(deploy_devices, self.gpus, home=self.gpu, split_stages=self.split_stages)


def place_worker(
    worker_id: str | None, worker_count: int, gpus: Sequence[int], *, split_stages: bool = False
) -> WorkerPlacement:
    """Round-robin a worker onto ``gpus``; workers sharing one GPU split its memory evenly.

    With ``split_stages`` and two or more GPUs every worker also runs the later stages of its two-stage models on
    the other GPUs (:func:`stage_devices`), so every worker may hold memory on every GPU of the run: each gets
    an equal share of each GPU (:attr:`WorkerPlacement.memory_fractions`).
    """
    if not gpus:
        raise PlacementError("no GPU to place the worker on")
    count = max(worker_count, 1)
    index = worker_index(worker_id)
    if index >= count:
        raise PlacementError(f"worker {worker_id} is outside the {count} workers of this run")
    load = Counter(gpus[i % len(gpus)] for i in range(count))
    gpu = gpus[index % len(gpus)]
    split = split_stages and len(gpus) > 1
    sharing = count if split else load[gpu]
    return WorkerPlacement(
        worker=worker_id or "master",
        gpu=gpu,
        sharing=sharing,
        memory_fraction=round(_FULL_SHARE / sharing, 4),
        gpus=tuple(gpus),
        split_stages=split,
    )


def stage_devices(
    deploy_devices: Sequence[str | None],
    gpus: Sequence[int],
    *,
    home: int | None = None,
    split_stages: bool = False,
) -> list[str]:
    """One torch device per stage.

    ``deploy_devices`` holds each stage's ``devices`` value from the deploy config ("0", "1", "0,1" or None;
    :func:`omnitts.knowledge.configs.deploy_stage_devices`); each names logical indices into ``gpus`` (the first
    index is the stage's own device, as vLLM-Omni makes it the stage process's ``cuda:0``). A deploy config that
    puts the stages on different devices is followed. Stages whose deploy entries all name one device run on
    ``home`` (the worker's GPU), so several workers never pile onto GPU 0; with ``split_stages`` and two or more
    GPUs, stage ``k`` then runs on ``gpus[(start + k) % len(gpus)]`` (``start``: the home GPU's position), so
    that every stage boundary crosses devices.
    """
    if not gpus:
        raise PlacementError("no GPU to place the stages on")
    home = gpus[0] if home is None else home
    if home not in gpus:
        raise PlacementError(f"GPU {home} is not among the GPUs of this run {list(gpus)}")
    logical: list[int] = []
    for stage, value in enumerate(deploy_devices):
        first = (value or "0").split(",")[0].strip()
        if not first.isdigit():
            raise PlacementError(f"stage {stage}: deploy devices {value!r} is not a device index list")
        logical.append(int(first))
    if len(set(logical)) > 1:
        for stage, index in enumerate(logical):
            if index >= len(gpus):
                raise PlacementError(
                    f"stage {stage}: deploy devices name GPU {index}, but this run has {len(gpus)} ({list(gpus)})"
                )
        return [f"cuda:{gpus[index]}" for index in logical]
    if split_stages and len(gpus) > 1:
        start = gpus.index(home)
        return [f"cuda:{gpus[(start + k) % len(gpus)]}" for k in range(len(logical))]
    return [f"cuda:{home}"] * len(logical)
