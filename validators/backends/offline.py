"""The offline backend: the tree's own offline ``Omni`` (``--engine offline``), run once per model and session by
``validators/engine/offline.py`` in the engine's environment; its ``OfflineRun`` observation is cut here into what
each check's verdict needs."""

from __future__ import annotations

import dataclasses

from omnitts.validators.backends.base import Backend, observes
from omnitts.validators.observations.audio import (
    ConcurrencyObservation,
    ConcurrentRound,
    DurationObservation,
    DurationRow,
    OutputsObservation,
    SeedObservation,
    Source,
    StreamObservation,
)
from omnitts.validators.observations.engine import OfflineRun, WorkerRun
from omnitts.validators.observations.model import ConsumerObservation, ExampleRun, WavFile
from omnitts.validators.observations.parity import ParityObservation
from omnitts.validators.observations.state import (
    AbortObservation,
    GrowthObservation,
    HeldAfter,
    HostSyncObservation,
    StateFreedObservation,
)
from omnitts.validators.runtime.context import CheckFailure
from omnitts.validators.runtime.subject import SYNC_BUDGET_PER_REQUEST_STEP


class OfflineBackend(Backend):
    name, title = "offline", "the tree's own offline engine"

    def __init__(self, ctx) -> None:
        self.ctx, self.source_device = ctx, ctx.options.device

    @property
    def session(self):
        return self.ctx.engine_session()

    @property
    def source(self) -> Source:
        return Source(self.name, self.source_device)

    def run(self) -> OfflineRun:
        found = self.session.offline()
        if found.error:
            raise CheckFailure(f"offline Omni failed: {found.error}\n{found.log}")
        return found

    def worker(self) -> WorkerRun:
        found = self.run().worker
        if found is None:
            raise CheckFailure("the offline run did not reach the in-worker observations (no worker extension)")
        if found.error:
            raise CheckFailure(f"in-worker observations failed: {found.error}\n{found.traceback[-1500:]}")
        return found

    @observes(DurationObservation)
    def duration(self) -> DurationObservation:
        found = self.run()
        rows = tuple(DurationRow(audio) for audio in found.scenario("solo").requests)
        about = {"startup_s": found.startup_s, "requests_from": found.requests_from}
        return DurationObservation(self.session.model, rows, self.session.sample_rate, about=about)

    @observes(ConcurrencyObservation)
    def concurrency(self) -> ConcurrencyObservation:
        found = self.run()
        rounds = tuple(ConcurrentRound(s.name, s.requests) for s in found.scenarios if s.name != "solo")
        return ConcurrencyObservation(self.source, found.scenario("solo").requests, rounds, self.session.model)

    @observes(StreamObservation)
    def stream(self) -> StreamObservation:
        """Each text streamed by the offline engine (every stage DELTA, pieces as the server streams them) against
        its solo whole output."""
        found = self.run()
        if not found.streams:
            return StreamObservation(self.source, (), unavailable="the offline run streamed nothing")
        return StreamObservation(self.source, found.streams, "offline Omni, DELTA outputs vs FINAL_ONLY")

    @observes(OutputsObservation)
    def outputs(self) -> OutputsObservation:
        return OutputsObservation(self.source, self.run().scenario("solo").requests)

    @observes(SeedObservation)
    def seeded(self) -> SeedObservation:
        found = self.run()
        if found.seed_error:
            return SeedObservation(self.source, rounds=(ConcurrentRound("seeded", (), errors=(found.seed_error,)),))
        scenarios = {s.name: s for s in found.seeded}
        if "seed_solo" not in scenarios:
            return SeedObservation(self.source, unavailable="the offline run made no seeded requests")
        solo = scenarios["seed_solo"].requests
        rounds = tuple(
            ConcurrentRound(s.name, s.requests) for s in found.seeded if s.name not in ("seed_solo", "seed_reseeded")
        )
        reseeded = scenarios["seed_reseeded"].requests[0] if "seed_reseeded" in scenarios else None
        about = {"seed_key": "stage 0 SamplingParams.seed (the runner's _omni_seed)", "same_seed_per_call": True}
        seeds = dict.fromkeys((a.request for a in solo), found.seed)
        return SeedObservation(self.source, solo, seeds, rounds, reseeded, about=about)

    @observes(AbortObservation)
    def aborts(self) -> AbortObservation:
        found = self.worker().aborts
        if found is None:
            raise CheckFailure("the offline run made no abort series in the workers")
        return found

    @observes(ConsumerObservation)
    def consumer(self) -> ConsumerObservation:
        import soundfile as sf

        example = self.run().example
        if example is None:
            why = f"no offline example in the tree for {self.session.model} (examples/offline_inference/...)"
            example = ExampleRun(missing=why)
        wavs = tuple(WavFile(w.path, *_info(sf, w.path)) for w in example.wavs)
        example = dataclasses.replace(example, wavs=wavs)
        return ConsumerObservation("the model's offline example", example=example, sample_rate=self.session.sample_rate)

    @observes(ParityObservation)
    def parity(self) -> ParityObservation:
        """``--reference CAPTURE``: the capture's requests through the tree's offline engine, built the way the
        release's serving adapter builds them, beside the reference's arrays (``validators/parity/engine.py``)."""
        from omnitts.validators.parity.engine import observe

        capture = self.ctx.options.engine.reference
        if capture is None:
            raise CheckFailure("the parity checks compare with a reference capture: pass --reference CAPTURE")
        session = self.session
        found = session.parity(capture)
        return observe(
            capture,
            found,
            release=session.release,
            model=session.model,
            model_dir=session.model_dir,
            device=self.source_device,
        )

    @observes(StateFreedObservation)
    def state_freed(self) -> StateFreedObservation:
        worker = self.worker()
        finished = worker.after_finish.seen
        aborted = worker.after_abort.seen - finished
        moments = (
            HeldAfter(
                "finish", "offline", worker.after_finish, dict.fromkeys(finished, "scheduler id of a finished request")
            ),
            HeldAfter(
                "abort",
                "offline",
                worker.after_abort,
                dict.fromkeys(aborted, "scheduler id of the aborted request"),
                frozenset(aborted),
            ),
        )
        return StateFreedObservation(moments, worker.interrupted, about={"worker_wall_s": worker.wall_s})

    @observes(GrowthObservation)
    def growth(self) -> GrowthObservation:
        worker = self.worker()
        before, after = worker.growth_before, worker.growth_after
        seen = sum(len(a.seen) - len(b.seen) for b, a in zip(before.workers, after.workers, strict=True))
        return GrowthObservation(worker.growth_requests, before, after, seen)

    @observes(HostSyncObservation)
    def host_syncs(self) -> HostSyncObservation:
        return HostSyncObservation(self.worker().syncs, SYNC_BUDGET_PER_REQUEST_STEP)


def _info(sf, path: str) -> tuple[int, int]:
    info = sf.info(path)
    return int(info.samplerate), int(info.frames)
