"""The server backend: the tree's own ``vllm-omni serve`` (``--engine server``). Its HTTP observations are the URL
backend's, made against the started server (so ``omnitts-probe`` and the server tier give the same verdicts on the
same server); what happens inside the workers is observed through vLLM's ``POST /collective_rpc`` and omnitts's
worker extension (``validators/engine/worker_ext.py``)."""

from __future__ import annotations

from omnitts.validators.backends.base import Backend, observes
from omnitts.validators.backends.texts import LONG_TEXT, TEXTS
from omnitts.validators.backends.url import UrlBackend
from omnitts.validators.backends.workers import SYNC_ARM, SYNC_REPORT, growth_loop, poll_settled
from omnitts.validators.observations import schema
from omnitts.validators.observations.audio import (
    ConcurrencyObservation,
    OutputsObservation,
    SeedObservation,
    StreamObservation,
)
from omnitts.validators.observations.server import BadRequestsObservation, FormatsObservation
from omnitts.validators.observations.state import (
    AbortObservation,
    GrowthObservation,
    HeldAfter,
    HostSyncObservation,
    StateFreedObservation,
)
from omnitts.validators.runtime.context import CheckFailure
from omnitts.validators.runtime.subject import SYNC_BUDGET_PER_REQUEST_STEP

SEQUENTIAL = 100  # requests of the growth loop
SETTLE_S = 30.0


class ServedUrl(UrlBackend):
    name = "server"


class ServerBackend(Backend):
    name, title = "server", "the tree's own server"

    def __init__(self, ctx) -> None:
        self.ctx, self.source_device, self._url = ctx, ctx.options.device, None

    @property
    def session(self):
        return self.ctx.engine_session()

    def server(self):
        try:
            return self.session.start_server()
        except Exception as exc:  # the server could not start: every server check fails with why
            raise CheckFailure(f"vllm-omni serve: {exc}") from exc

    def url(self) -> UrlBackend:
        if self._url is None:
            server = self.server()
            self._url = ServedUrl(
                server.url,
                str(self.session.model_dir),
                sample_rate=self.session.sample_rate,
                av_python=str(self.session.env.python),
                bad_timeout=60.0,
                rpc=self.rpc,
            )
            self._url.source_device = self.source_device
        return self._url

    def rpc(self, method: str) -> list:
        return self.server().rpc(method)

    # ------------------------------------------------------------------------------------------ over HTTP
    @observes(FormatsObservation)
    def formats(self) -> FormatsObservation:
        return self.url().observe(FormatsObservation)

    @observes(StreamObservation)
    def stream(self) -> StreamObservation:
        return self.url().observe(StreamObservation)

    @observes(ConcurrencyObservation)
    def concurrency(self) -> ConcurrencyObservation:
        return self.url().observe(ConcurrencyObservation)

    @observes(BadRequestsObservation)
    def bad_requests(self) -> BadRequestsObservation:
        return self.url().observe(BadRequestsObservation)

    @observes(OutputsObservation)
    def outputs(self) -> OutputsObservation:
        return self.url().observe(OutputsObservation)

    @observes(SeedObservation)
    def seeded(self) -> SeedObservation:
        return self.url().observe(SeedObservation)

    @observes(AbortObservation)
    def aborts(self) -> AbortObservation:
        """Disconnects at several offsets over HTTP; the workers' state and memory through ``/collective_rpc``."""
        return self.url().observe(AbortObservation)

    # ------------------------------------------------------------------------------------------ inside the workers
    @observes(StateFreedObservation)
    def state_freed(self) -> StateFreedObservation:
        """A client that disconnects mid-stream: what the workers hold once the engine told them it finished."""
        url = self.url()
        before = poll_settled(self.rpc, 0).seen
        answer = url.speech({"input": LONG_TEXT, "response_format": "pcm", "stream": True}, until=b"speech.audio.delta")
        mid_stream = b"speech.audio.delta" in answer.body and b"speech.audio.done" not in answer.body
        after = poll_settled(self.rpc, SETTLE_S, ready=lambda s: bool(s.seen - before))
        left = after.seen - before
        failures = () if answer.status == 200 else (f"stream: {answer.brief()}",)
        moment = HeldAfter(
            "disconnect", "server", after, dict.fromkeys(left, "scheduler id of the request whose client left")
        )
        return StateFreedObservation((moment,), mid_stream, failures=failures)

    @observes(HostSyncObservation)
    def host_syncs(self) -> HostSyncObservation:
        """The spy armed after a warm-up request, then 4 requests at once through ``/v1/audio/speech``."""
        url = self.url()
        warm = url.speech({"input": TEXTS[0], "response_format": "pcm"})
        if not warm.ok:
            return HostSyncObservation((), SYNC_BUDGET_PER_REQUEST_STEP, (f"warm-up: {warm.brief()}",))
        self.rpc(SYNC_ARM)
        answers = url.at_once([{"input": t, "response_format": "pcm"} for t in TEXTS[:4]])
        reports = tuple(schema.load(a) for a in self.rpc(SYNC_REPORT))
        failures = tuple(f"{t!r}: {a.brief()}" for t, a in zip(TEXTS, answers, strict=False) if not a.ok)
        return HostSyncObservation(reports, SYNC_BUDGET_PER_REQUEST_STEP, failures)

    @observes(GrowthObservation)
    def growth(self) -> GrowthObservation:
        """Sequential requests of 3 new tokens each; the workers' state after the first and after the last."""
        url, failed = self.url(), []

        def send(i: int) -> None:
            answer = url.speech({"input": TEXTS[i % len(TEXTS)], "response_format": "pcm", "max_new_tokens": 3})
            if not answer.ok:
                failed.append(f"request {i}: {answer.brief()}")

        before, after = growth_loop(send, lambda: poll_settled(self.rpc, SETTLE_S), SEQUENTIAL)
        seen = sum(len(a.seen) - len(b.seen) for b, a in zip(before.workers, after.workers, strict=True))
        failures = (f"{len(failed)} of {SEQUENTIAL} requests failed: {failed[:3]}",) if failed else ()
        return GrowthObservation(SEQUENTIAL, before, after, seen, failures)
