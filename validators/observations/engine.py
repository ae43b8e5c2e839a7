"""What one offline run of the tree's own engine observed (written by ``validators/engine/offline.py`` inside the
engine's environment, read back by the offline backend)."""

from __future__ import annotations

from omnitts.validators.observations.audio import RequestAudio, StreamPair
from omnitts.validators.observations.model import ExampleRun
from omnitts.validators.observations.schema import observation
from omnitts.validators.observations.state import AbortObservation, StateSnapshot, SyncReport


@observation
class Scenario:
    """Requests of one scenario (``solo``: one at a time; ``batchN``: submitted together), each ``request`` its text."""

    name: str
    requests: tuple[RequestAudio, ...]
    wall_s: float = 0.0


@observation
class WorkerRun:
    """The in-worker part: state after every request finished and after an abort (``interrupted``: it came while
    the request still streamed), sync reports of 4 concurrent requests, state around sequential requests."""

    after_finish: StateSnapshot | None = None
    after_abort: StateSnapshot | None = None
    interrupted: bool = False
    syncs: tuple[SyncReport, ...] = ()
    growth_requests: int = 0
    growth_before: StateSnapshot | None = None
    growth_after: StateSnapshot | None = None
    aborts: AbortObservation | None = None  # repeated aborts at several offsets, state and memory around them
    wall_s: float = 0.0
    error: str | None = None
    traceback: str = ""


@observation
class OfflineRun:
    startup_s: float | None = None
    requests_from: str = ""
    scenarios: tuple[Scenario, ...] = ()
    example: ExampleRun | None = None
    worker: WorkerRun | None = None
    streams: tuple[StreamPair, ...] = ()  # each text streamed (DELTA outputs), against its solo whole output
    seed: int | None = None  # the seed of the seeded scenarios (stage 0's sampling params)
    seeded: tuple[Scenario, ...] = ()  # seed_solo, then the seeded compositions, then seed_reseeded
    seed_error: str | None = None  # the seeded scenarios failed (recorded for the seed check only)
    error: str | None = None
    traceback: str = ""
    log: str = ""

    def scenario(self, name: str) -> Scenario | None:
        return next((s for s in self.scenarios if s.name == name), None)
