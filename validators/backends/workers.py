"""What every backend that looks inside a model shares: the worker RPC client, the worker-state poller, the growth
loop, and the typed form of a sync spy's report. Runs in the test process, in the engine's offline driver and
inside the engine's workers (standard library and the observation types only)."""

from __future__ import annotations

import time
from collections.abc import Callable

from omnitts.validators.backends.http import send
from omnitts.validators.observations import schema
from omnitts.validators.observations.state import StateSnapshot, SyncEvent, SyncReport, WorkerState

# worker RPC methods (validators/engine/worker_ext.py)
STATE, SYNC_ARM, SYNC_REPORT, MEMORY = "omnitts_state", "omnitts_sync_arm", "omnitts_sync_report", "omnitts_memory"


def collective_rpc(base: str, method: str, timeout: float = 120) -> list:
    """``method`` of omnitts's worker extension on every worker of a server (vLLM's development endpoint ``POST
    /collective_rpc``, mounted under ``VLLM_SERVER_DEV_MODE=1``): one answer per worker, stage by stage."""
    answer = send(base, "POST", "/collective_rpc", {"method": method, "timeout": timeout}, timeout=timeout + 30)
    if not answer.ok:
        raise RuntimeError(f"POST /collective_rpc {method}: {answer.brief()}")
    results = []
    for stage in answer.json()["results"]:
        results.extend(stage if isinstance(stage, list) else [stage])
    return results


def worker_states(answers: list) -> tuple[WorkerState, ...]:
    """The typed state of each worker's ``omnitts_state`` answer (the observation schema's documents)."""
    return tuple(schema.load(a) for a in answers)


def poll_settled(
    rpc: Callable[[str], list], wait: float = 30.0, ready: Callable[[StateSnapshot], bool] = lambda _: True
) -> StateSnapshot:
    """The workers' state once every request they were given has been reported finished to them (the scheduler tells
    the runner in the step after a request ends) and ``ready`` holds; ``settled`` says whether that happened within
    ``wait``."""
    deadline = time.monotonic() + wait
    while True:
        workers = worker_states(rpc(STATE))
        settled = all(w.settled for w in workers) and ready(StateSnapshot(workers))
        if settled or time.monotonic() > deadline:
            return StateSnapshot(workers, settled)
        time.sleep(0.25)


def growth_loop(send: Callable[[int], None], snapshot: Callable[[], StateSnapshot], requests: int):
    """Request 0, a snapshot, requests 1 .. ``requests - 1`` one after the other, a snapshot: (before, after)."""
    send(0)
    before = snapshot()
    for i in range(1, requests):
        send(i)
    return before, snapshot()


def sync_report(report, steady: dict[str, int], device: str) -> SyncReport:
    """The typed form of a :class:`~omnitts.validators.runtime.syncspy.SyncReport` (``steady``: step label ->
    requests scheduled in that steady-state step)."""

    def events(found) -> tuple[SyncEvent, ...]:
        return tuple(SyncEvent(e.op, e.where, e.label, e.suppressed) for e in found)

    return SyncReport(
        dict(steady),
        dict(report.steps),
        events(report.events),
        dict(report.debug_steps),
        events(report.debug_events),
        device,
    )
