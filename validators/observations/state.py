"""Observations of what a model holds and does between requests: its containers, the ids it saw, its host syncs."""

from __future__ import annotations

from typing import Any

from omnitts.validators.observations.schema import observation


@observation
class Container:
    """One dict/list/set/tuple/deque attribute of a model (or one dict inside a dict attribute)."""

    path: str
    size: int
    keys: tuple[str, ...]
    nbytes: int


@observation
class WorkerState:
    """What one worker (or the harness's stage models) holds, and the scheduler ids it was given and told finished."""

    containers: tuple[Container, ...]
    seen: tuple[str, ...] = ()
    finished: tuple[str, ...] = ()

    @property
    def settled(self) -> bool:
        return set(self.seen) <= set(self.finished)


@observation
class StateSnapshot:
    """Every worker's state at one moment; ``settled``: each request a worker was given had been reported finished to
    it by then (the poller waits for that)."""

    workers: tuple[WorkerState, ...]
    settled: bool = True

    @property
    def seen(self) -> set[str]:
        return {rid for w in self.workers for rid in w.seen}


@observation
class HeldAfter:
    """The state after requests ended (``when``: finish, abort, disconnect), and the ids to look for in it (id ->
    what it is); ``aborted`` are ids of requests that were aborted."""

    when: str
    scenario: str
    state: StateSnapshot
    ids: dict[str, str]
    aborted: frozenset[str] = frozenset()


@observation
class StateFreedObservation:
    """i5.state_freed. ``interrupted``: the abort / disconnect came while the request still streamed (None: the
    backend aborts at a chosen step, so it always does)."""

    moments: tuple[HeldAfter, ...]
    interrupted: bool | None = None
    failures: tuple[str, ...] = ()  # requests that failed (HTTP status, transport)
    release: str | None = None
    id_key: str | None = None  # the key the release writes the scheduler id under (what to key state by)
    about: dict[str, Any] | None = None


@observation
class GrowthObservation:
    """i5.no_growth: the state after the first of ``requests`` sequential requests and after the last; ``seen``:
    requests that reached the workers in between (None: not observable); ``failures``: requests that failed."""

    requests: int
    before: StateSnapshot
    after: StateSnapshot
    seen: int | None = None
    failures: tuple[str, ...] = ()


# ``SyncEvent.where`` prefixes of a sync with no model frame on the stack (the sync spy's attribution): omnitts's own
# runtime synced, or other code (e.g. the serving runner) did; any other ``where`` is a model line
HARNESS = "omnitts harness: "
OUTSIDE = "outside the model: "
UNKNOWN = "<unknown>"


@observation
class Memory:
    """One process's memory at one moment: its resident set, the bytes of tensors its model holds beyond its
    parameters and buffers (reached from the model object: per-request caches, generators' frames), and CUDA memory
    allocated (None off CUDA)."""

    rss: int
    held: int
    cuda: int | None = None


@observation
class AbortAttempt:
    """One client that went away: ``offset`` how far into the stream (said as asked), ``received`` the audio
    pieces it had by then, ``interrupted`` it left while the request still streamed."""

    offset: str
    request: str
    received: int
    interrupted: bool
    seconds: float | None = None
    error: str | None = None


@observation
class AbortObservation:
    """i5.abort_recovery: the state and memory of every worker before a series of aborts (after a warm-up) and after
    it, the aborts themselves, the ids of the aborted requests (id -> what) and whether a request after them is
    served. ``unavailable``: the backend cannot look inside the model (the check is then not run)."""

    attempts: tuple[AbortAttempt, ...] = ()
    before: StateSnapshot | None = None
    after: StateSnapshot | None = None
    memory_before: tuple[Memory, ...] = ()
    memory_after: tuple[Memory, ...] = ()
    ids: dict[str, str] | None = None
    served_after: str | None = None  # None: the request after the aborts was served, else why not
    failures: tuple[str, ...] = ()
    device: str = "cpu"
    unavailable: str | None = None


@observation
class SyncEvent:
    op: str
    where: str
    label: str
    suppressed: str | None = None

    @property
    def owner(self) -> str:
        """Whose line synced: ``model``, ``model, suppressed``, ``harness``, ``outside the model`` or ``unknown``."""
        if self.suppressed:
            return "model, suppressed"
        for prefix, owner in ((HARNESS, "harness"), (OUTSIDE, "outside the model"), (UNKNOWN, "unknown")):
            if self.where.startswith(prefix):
                return owner
        return "model"


@observation
class SyncReport:
    """One sync spy's report (one worker): syncs per step label by the dispatch spy and by
    ``torch.cuda.set_sync_debug_mode``, and the steady-state steps (label -> scheduled requests)."""

    steady: dict[str, int]
    steps: dict[str, int]
    events: tuple[SyncEvent, ...]
    debug_steps: dict[str, int]
    debug_events: tuple[SyncEvent, ...]
    device: str = "cpu"
    error: str | None = None


@observation
class HostSyncObservation:
    """i3.host_syncs: the sync reports of a run of concurrent requests, armed after warm-up."""

    reports: tuple[SyncReport, ...]
    budget_per_request_step: int
    failures: tuple[str, ...] = ()


@observation
class AliasObservation:
    """i5.outputs_not_aliased: outputs that changed after they were returned."""

    violations: tuple[str, ...]
    pattern: str = ""
