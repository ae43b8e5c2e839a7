"""The URL backend: a running ``/v1/audio/speech`` server, observed over HTTP only (``omnitts-probe``, and the HTTP
half of the server tier).

It never imports vLLM-Omni, so a contributor aims it at their real model on their own GPU. What the server offers
(response formats, ``stream_format``, the request fields) is read from its ``/openapi.json`` when it has one. Every
request has a bounded time: a server that never answers fails the check that asked, it does not hang the run.
"""

from __future__ import annotations

import math
import threading
import time
import urllib.parse
from collections.abc import Callable

import numpy as np

from omnitts.validators.backends import decode, discovery, sse
from omnitts.validators.backends.base import Backend, observes
from omnitts.validators.backends.http import SPEECH, Answer, Bound, send
from omnitts.validators.backends.texts import (
    LONG_TEXT,
    OVERSIZED_CHARS,
    STILL_SERVING,
    TEXTS,
    UNSUPPORTED_FORMATS,
    bad_requests,
)
from omnitts.validators.backends.workers import MEMORY, poll_settled
from omnitts.validators.observations import schema
from omnitts.validators.observations.audio import (
    ConcurrencyObservation,
    ConcurrentRound,
    OutputsObservation,
    PerfObservation,
    PerfRound,
    Repeat,
    RequestAudio,
    SeedObservation,
    Source,
    StreamObservation,
    StreamPair,
    Timing,
)
from omnitts.validators.observations.server import (
    BadRequest,
    BadRequestsObservation,
    FormatResult,
    FormatsObservation,
)
from omnitts.validators.observations.state import AbortAttempt, AbortObservation
from omnitts.validators.verdicts.server import LOSSY

FORMATS = ("wav", "pcm", "flac", "mp3", "opus")
SEED = 1234  # the first seeded request's seed (the others count up from it)
ABORT_REPEATS = 3  # disconnects at each offset
SETTLE_S = 30.0

# A speech answer holds at most the longest audio its request can honestly ask for, so a flood is cut there and never
# held whole: its input's characters (at most the longest text the probe asks audio for: the oversized bad request
# asks for a refusal) x SECONDS_PER_CHAR x the highest sample rate x BYTES_PER_SAMPLE x SSE_OVERHEAD, and never below
# MIN_SECONDS of audio.
SECONDS_PER_CHAR = 1.0  # speech takes about 0.07 s a character; 1 s is 15 times the slowest of it
MIN_SECONDS = 10.0  # a few characters may still be a few seconds of audio
MAX_RATE = 48_000  # Hz, the highest rate a speech model serves (a higher --sample-rate raises it)
BYTES_PER_SAMPLE = 4  # 16-bit stereo or 32-bit float mono, twice the 16-bit mono PCM asked for
SSE_OVERHEAD = 2  # base64 (4/3 of the bytes) and each event's JSON around it
LONGEST_TEXT = max(len(t) for t in (*TEXTS, STILL_SERVING, LONG_TEXT))


class ProbeError(RuntimeError):
    """No speech server at the URL, a malformed answer about it, the model is not served there, or a bad setting (one
    line): nothing can be observed."""


def audio_bound(text, sample_rate: int | None = None) -> Bound:
    """The bound of the answer to a speech request for ``text``."""
    chars = min(len(text) if isinstance(text, str) else 0, LONGEST_TEXT)
    seconds = max(MIN_SECONDS, chars * SECONDS_PER_CHAR)
    rate = max(MAX_RATE, sample_rate or 0)
    size = int(seconds * rate * BYTES_PER_SAMPLE * SSE_OVERHEAD)
    why = (
        f"{seconds:g} s of audio for {chars} characters at {SECONDS_PER_CHAR:g} s each, x {rate} Hz "
        f"x {BYTES_PER_SAMPLE} bytes x {SSE_OVERHEAD} for SSE"
    )
    return Bound(size, why)


def _seconds(name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ProbeError(f"{name} must be a positive number of seconds (got {value!r})")
    return float(value)


def has_av() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def _json(answer: Answer, where: str) -> bool:
    """A 200 that is not a web page: what the server says about itself (HTML there is a web server's, not an API's).
    A 200 cut short (too large, short, hung) is a malformed answer."""
    if answer.status == 200 and answer.error is not None:
        raise ProbeError(f"{where}: {answer.error}")
    return answer.status == 200 and not answer.text().startswith("an HTML page")


def _streamed(mode: str, answer: Answer) -> tuple[list[tuple[float, bytes]], str | None]:
    """The audio pieces of a streamed answer, and why the stream is not whole when it is not: a raw stream that
    stops inside a 16-bit sample, an SSE stream without its final ``speech.audio.done`` or with an error event (a
    transport cut, short or unfinished body, is the answer's error already)."""
    if mode == "audio":
        odd = sum(len(p) for _, p in answer.reads) % 2
        return answer.reads, "truncated: the stream stops inside a 16-bit sample" if odd else None
    found = sse.events(answer.reads)
    try:
        chunks = sse.audio(found)
    except (KeyError, ValueError) as exc:
        return [], f"a delta without base64 `audio`: {exc}"
    failed = [data for _, kind, data in found if kind.endswith(".error")]
    if failed:
        return chunks, f"the stream reports an error: {str(failed[0])[:200]}"
    if not found or found[-1][1] != sse.DONE:
        return chunks, f"truncated: the stream ends without {sse.DONE} after {len(chunks)} audio deltas"
    return chunks, None


def _status(answer: Answer) -> str:
    return answer.error or f"HTTP {answer.status}"


class UrlBackend(Backend):
    name, title = "url", "a running speech server (omnitts-probe)"

    def __init__(
        self,
        url: str,
        model: str,
        *,
        timeout: float = 120.0,
        bad_timeout: float = 30.0,
        concurrency: tuple[int, ...] = (1, 4, 8),
        seed: int | None = None,
        extra: dict | None = None,
        sample_rate: int | None = None,
        av_python: str | None = None,
        oversized_chars: int = OVERSIZED_CHARS,
        api_key: str | None = None,
        rpc: Callable[[str], list] | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        try:
            parsed.port  # noqa: B018 - urlsplit checks the port only when it is read
        except ValueError as exc:
            raise ProbeError(f"--url must be http://HOST:PORT: {exc} (got {url!r})") from None
        if parsed.scheme != "http" or not parsed.hostname or parsed.path not in ("", "/"):
            raise ProbeError(f"--url must be http://HOST:PORT (got {url!r})")
        self.url, self.model = f"http://{parsed.netloc}", model
        self.timeout, self.bad_timeout = _seconds("--timeout", timeout), _seconds("--bad-timeout", bad_timeout)
        self.concurrency = tuple(concurrency)
        if sample_rate is not None and (not isinstance(sample_rate, int) or sample_rate <= 0):
            raise ProbeError(f"--sample-rate must be a positive number of Hz (got {sample_rate!r})")
        self.av_python, self.oversized_chars, self.api_key = av_python, oversized_chars, api_key
        self.base = {"model": model, **(extra or {})}
        if seed is not None:
            self.base["seed"] = seed
        self.sample_rate = sample_rate
        self.sample_rate_given = sample_rate  # what bounds answers: never a rate a server's own header claims
        self.schema: dict | None = None  # None until discovered
        self.formats: tuple[str, ...] = FORMATS
        self.stream_formats: tuple[str, ...] | None = None  # None: the schema does not say
        self.solo: dict[str, np.ndarray] = {}
        self.repeat: Repeat | None = None  # the first solo request, asked twice
        # omnitts's worker extension behind the server (``POST /collective_rpc``): what the workers hold
        self.rpc = rpc

    @property
    def source(self) -> Source:
        return Source(self.name, self.source_device)

    # observed once and judged by several checks (the stream: i1.stream_equals_offline, no_replay, seams)
    REUSED = (StreamObservation, OutputsObservation)

    def observe(self, kind: type):
        kept = self.__dict__.setdefault("_kept", {})
        if kind in self.REUSED and kind in kept:
            self.observed[kind] = kept[kind]
            return kept[kind]
        found = super().observe(kind)
        if kind in self.REUSED:
            kept[kind] = found
        return found

    # ------------------------------------------------------------------------------------------ plumbing
    def speech(self, body: dict, *, timeout: float | None = None, until: bytes | None = None) -> Answer:
        fields = {k: v for k, v in {**self.base, **body}.items() if v is not None}
        return send(
            self.url,
            "POST",
            SPEECH,
            fields,
            timeout=timeout or self.timeout,
            api_key=self.api_key,
            until=until,
            bound=audio_bound(fields.get("input"), self.sample_rate_given),
        )

    def discover(self) -> dict:
        """Is a speech server there, does it serve the model, and what does its speech schema offer? (asked once)"""
        if self.schema is not None:
            return self.schema
        health = self._get("/v1/models")
        if health.status is None:
            raise ProbeError(f"no server answers at {self.url}: {health.error}")
        if health.status in (401, 403):
            raise ProbeError(f"{self.url} refuses the probe (HTTP {health.status}): pass --api-key")
        if _json(health, f"{self.url}/v1/models"):
            try:
                served = discovery.served_models(health.json())
            except ValueError as exc:
                raise ProbeError(f"{self.url}/v1/models is not an OpenAI model list: {exc}") from None
            if served and self.model not in served:
                shown = ", ".join(repr(m) for m in served[:8]) + (
                    f" and {len(served) - 8} more" if len(served) > 8 else ""
                )
                raise ProbeError(f"model {self.model!r} is not served at {self.url}; it serves {shown}")
        api = self._get("/openapi.json")
        offer = None
        if _json(api, f"{self.url}/openapi.json"):
            try:
                offer = discovery.speech_schema(api.json())
            except ValueError as exc:
                raise ProbeError(
                    f"{self.url}/openapi.json is not an OpenAPI document the probe can read: {exc}"
                ) from None
            if offer.paths is not None and SPEECH not in offer.paths:
                listed = ", ".join(sorted(offer.paths)[:6]) or "no paths"
                raise ProbeError(f"{self.url} is not a {SPEECH} server: its /openapi.json offers {listed}")
        if offer is None or offer.paths is None and not offer.fields:
            self._ask_speech(health, api)  # nothing says the route is there
        self.schema = {"name": offer.name if offer else None, "fields": list(offer.fields) if offer else []}
        if offer and offer.formats:
            self.formats = offer.formats
        if offer and offer.stream_formats is not None:
            self.stream_formats = offer.stream_formats
        return self.schema

    def _get(self, path: str) -> Answer:
        return send(self.url, "GET", path, timeout=min(self.timeout, 30), api_key=self.api_key)

    def _ask_speech(self, health: Answer, api: Answer) -> None:
        """One speech request, when neither /v1/models nor /openapi.json says a speech route is there: a route that
        is not there (404, 405, 501) or a web page is no speech server, and the probe says so once."""
        answer = self.speech({"input": TEXTS[0], "response_format": "wav"})
        kind = answer.headers.get("content-type", "")
        page = kind.startswith(("text/html", "application/json")) or answer.text().startswith("an HTML page")
        if answer.status in (404, 405, 501) or answer.status == 200 and answer.error is None and page:
            asked = f"GET /v1/models: {_status(health)}, GET /openapi.json: {_status(api)}"
            raise ProbeError(f"{self.url} is not a {SPEECH} server: POST {SPEECH} answers {answer.brief()} ({asked})")

    def pcm(self, text: str) -> np.ndarray:
        """The solo non-streamed PCM of ``text`` (asked twice the first time: is the server deterministic?)."""
        self.discover()
        if text not in self.solo:
            first = self.speech({"input": text, "response_format": "pcm"})
            if not first.ok:
                raise RuntimeError(f"solo pcm of {text!r}: {first.brief()}")
            self.solo[text] = decode.pcm(first.body)
            if self.repeat is None:
                again = self.speech({"input": text, "response_format": "pcm"})
                first = self.audio(repr(text), self.solo[text], text=text)
                heard = self.audio(repr(text), decode.pcm(again.body), text=text) if again.ok else None
                self.repeat = Repeat(first, heard, None if again.ok else again.brief())
        return self.solo[text]

    def audio(self, label: str, samples: np.ndarray, deltas: tuple[int, ...] = (), text: str | None = None):
        return RequestAudio(label, samples, self.need_sample_rate(), deltas, text)

    def need_sample_rate(self) -> int:
        self.discover()
        if not self.sample_rate:
            wav = self.speech({"input": TEXTS[0], "response_format": "wav"})
            if not wav.ok:
                raise RuntimeError(f"no sample rate: wav {wav.brief()}; pass --sample-rate")
            self.sample_rate = decode.decode("wav", wav.body, 0)[1]
        return self.sample_rate

    def at_once(self, bodies: list[dict]) -> list[Answer]:
        """All requests released together (a barrier), each with its own bounded time."""
        answers: list[Answer | None] = [None] * len(bodies)
        gate = threading.Barrier(len(bodies))

        def ask(i: int) -> None:
            gate.wait()
            answers[i] = self.speech(bodies[i])

        threads = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(len(bodies))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(self.timeout + 10)
        return [a or Answer(None, {}, b"", error="request thread did not finish") for a in answers]

    # ------------------------------------------------------------------------------------------ observations
    @observes(FormatsObservation)
    def formats_observation(self) -> FormatsObservation:
        self.discover()
        text, wav_sr = TEXTS[0], None
        if "wav" in self.formats:
            wav = self.speech({"input": text, "response_format": "wav"})
            if not wav.ok:
                return FormatsObservation(
                    self.source, self.formats, self.sample_rate, None, (), problem=f"wav: {wav.brief()}"
                )
            wav_sr = decode.decode("wav", wav.body, 0)[1]
            self.sample_rate = self.sample_rate or wav_sr
        if not self.sample_rate:
            why = "no sample rate: the server offers no wav; pass --sample-rate for its pcm"
            return FormatsObservation(self.source, self.formats, None, None, (), problem=why)
        pcm = self.audio("pcm", self.pcm(text), text=text)
        results = []
        for fmt in self.formats:
            answer = self.speech({"input": text, "response_format": fmt})
            kind = answer.headers.get("content-type")
            if not answer.ok:
                results.append(FormatResult(fmt, answer.brief(), kind))
                continue
            wrong = decode.container_problem(fmt, answer.body)
            if wrong:  # decoders sniff the container: a flac request answered with WAV bytes would decode fine
                results.append(FormatResult(fmt, wrong, kind))
                continue
            try:
                samples, sr = decode.decode(fmt, answer.body, self.sample_rate, engine_python=self.av_python)
            except Exception as exc:  # noqa: BLE001 - not decodable here is the observation
                lacks_av = fmt in LOSSY and self.av_python is None and not has_av()
                hint = " (PyAV is not importable here; --av-python PY decodes with another Python)" if lacks_av else ""
                results.append(FormatResult(fmt, None, kind, decode_error=str(exc), hint=hint))
                continue
            results.append(FormatResult(fmt, None, kind, RequestAudio(fmt, samples, sr, text=text)))
        return FormatsObservation(
            self.source, self.formats, self.sample_rate, pcm, tuple(results), wav_sr, None, self.repeat
        )

    @observes(StreamObservation)
    def stream_observation(self) -> StreamObservation:
        text = TEXTS[1]
        whole = self.audio("whole", self.pcm(text), text=text)
        modes = self.stream_formats
        if modes == ():
            return StreamObservation(
                self.source, (), unavailable="the server's speech schema offers no streaming (no `stream` field)"
            )
        pairs = []
        for mode in ("sse", "audio") if modes is None else modes:
            body = {"input": text, "response_format": "pcm", "stream": True}
            if mode == "audio" or modes is not None and "stream_format" in self.schema.get("fields", []):
                body["stream_format"] = mode
            answer = self.speech(body)
            label = f"stream ({mode})"
            if not answer.ok:
                if modes is None and mode == "audio" and answer.status is not None and 400 <= answer.status < 500:
                    continue  # not offered, and no schema to say otherwise
                pairs.append(StreamPair(label, error=answer.brief()))
                continue
            events = None
            if mode == "sse":
                found = sse.events(answer.reads)
                events = tuple(kind for _, kind, _ in found)
                try:
                    pieces = [piece for _, piece in sse.audio(found)]
                except (KeyError, ValueError) as exc:
                    pairs.append(StreamPair(label, error=f"a delta without base64 `audio`: {exc}"))
                    continue
            else:
                pieces = [piece for _, piece in answer.reads]
            samples = decode.pcm(b"".join(pieces))
            sizes = tuple(len(p) // 2 for p in pieces) if sum(len(p) % 2 for p in pieces) == 0 else ()
            got = self.audio(label, samples, sizes, text)
            pairs.append(StreamPair(label, got, whole, events=events, transport=mode != "sse"))
        return StreamObservation(self.source, tuple(pairs), repeat=self.repeat)

    def rounds(self, batches: dict[str, list[str]], request) -> tuple[ConcurrentRound, ...]:
        """Each batch's texts sent at once (``request`` makes a text's body); the audio of each answer, in order."""
        found = []
        for name, batch in batches.items():
            answers = self.at_once([request(t) for t in batch])
            got, errors = [], []
            for text, answer in zip(batch, answers, strict=True):
                if answer.ok:
                    got.append(self.audio(repr(text), decode.pcm(answer.body), text=text))
                else:
                    errors.append(f"{text!r}: {answer.brief()}")
            found.append(ConcurrentRound(name, tuple(got), errors=tuple(errors)))
        return tuple(found)

    @observes(ConcurrencyObservation)
    def concurrency_observation(self) -> ConcurrencyObservation:
        solo = tuple(self.audio(repr(t), self.pcm(t), text=t) for t in TEXTS)
        rounds = self.rounds(
            {
                f"{len(TEXTS)} at once": list(TEXTS),
                f"{2 * len(TEXTS)} at once (reversed, each twice)": list(reversed(TEXTS)) * 2,
            },
            lambda text: {"input": text, "response_format": "pcm"},
        )
        return ConcurrencyObservation(self.source, solo, tuple(rounds), repeat=self.repeat)

    @observes(OutputsObservation)
    def outputs_observation(self) -> OutputsObservation:
        """Every text's solo audio (16-bit PCM: a NaN the model made arrives as a number)."""
        found = tuple(self.audio(repr(t), self.pcm(t), text=t) for t in TEXTS)
        return OutputsObservation(self.source, found, pcm=True)

    @observes(SeedObservation)
    def seed_observation(self) -> SeedObservation:
        """Four texts, each with its own ``seed``, alone and then together (at once, in reverse, one of them twice);
        the first alone with another seed."""
        fields = set(self.discover().get("fields", []))
        if fields and "seed" not in fields:
            return SeedObservation(self.source, unavailable="the server's speech schema has no `seed` field")
        texts = list(TEXTS[:4])
        seeds = {repr(t): SEED + i for i, t in enumerate(texts)}

        def body(text: str, seed: int) -> dict:
            return {"input": text, "response_format": "pcm", "seed": seed}

        solo = []
        for text in texts:
            answer = self.speech(body(text, seeds[repr(text)]))
            if not answer.ok:
                return SeedObservation(self.source, unavailable=f"seeded request {text!r}: {answer.brief()}")
            solo.append(self.audio(repr(text), decode.pcm(answer.body), text=text))
        rounds = self.rounds(
            {
                "4 seeded at once": texts,
                "4 seeded, reversed": list(reversed(texts)),
                "one seeded request twice": [texts[0], texts[1], texts[0], texts[2]],
            },
            lambda text: body(text, seeds[repr(text)]),
        )
        other = self.speech(body(texts[0], SEED + 100))
        reseeded = self.audio(repr(texts[0]), decode.pcm(other.body), text=texts[0]) if other.ok else None
        about = {"seed_key": "the request's `seed` field"}
        return SeedObservation(self.source, tuple(solo), seeds, tuple(rounds), reseeded, about=about)

    @observes(AbortObservation)
    def abort_observation(self) -> AbortObservation:
        """Clients that leave a stream of a long text after its first delta and at a third and two thirds of its
        duration (timed on a whole stream of it), three times each; what the workers hold and their memory
        before and after, through omnitts's worker extension (``rpc``)."""
        if self.rpc is None:
            why = (
                "what the workers hold is not observable over /v1/audio/speech: pass --worker-rpc for a server started "
                "with omnitts's worker extension (--worker-extension-cls "
                "omnitts.validators.engine.worker_ext.OmnittsWorkerExtension, VLLM_SERVER_DEV_MODE=1)"
            )
            return AbortObservation(unavailable=why)
        self.discover()
        body = {"input": LONG_TEXT, "response_format": "pcm", "stream": True}
        if self.stream_formats and "stream_format" in self.schema.get("fields", []):
            body["stream_format"] = "sse"
        whole = self.speech(body)
        if not whole.ok:
            return AbortObservation(failures=(f"a whole stream of the long text: {whole.brief()}",))
        arrivals = [at for at, kind, _ in sse.events(whole.reads) if kind == "speech.audio.delta"]
        if len(arrivals) < 3:
            return AbortObservation(failures=(f"the long text streamed {len(arrivals)} deltas; need 3 or more",))
        first, last = arrivals[0], arrivals[-1]
        offsets = [
            ("after its first delta", None),
            ("at a third of the stream", first + (last - first) / 3),
            ("at two thirds of the stream", first + 2 * (last - first) / 3),
        ]
        before = poll_settled(self.rpc, SETTLE_S)
        memory_before = tuple(schema.load(a) for a in self.rpc(MEMORY))
        attempts = []
        for rep in range(ABORT_REPEATS):
            for offset, seconds in offsets:
                t0 = time.monotonic()
                if seconds is None:
                    answer = self.speech(body, until=b"speech.audio.delta")
                else:
                    answer = self.speech(body, timeout=seconds)
                received = sum(1 for _, kind, _ in sse.events(answer.reads) if kind == "speech.audio.delta")
                done = b"speech.audio.done" in answer.body
                error = None if answer.status == 200 else answer.brief()
                label = f"{LONG_TEXT[:24]!r}... #{rep}"
                attempts.append(
                    AbortAttempt(
                        offset, label, received, received > 0 and not done, round(time.monotonic() - t0, 3), error
                    )
                )
        after = poll_settled(self.rpc, SETTLE_S, ready=lambda s: bool(s.seen - before.seen))
        ids = dict.fromkeys(after.seen - before.seen, "scheduler id of a request whose client left")
        memory_after = tuple(schema.load(a) for a in self.rpc(MEMORY))
        served = self.speech({"input": TEXTS[0], "response_format": "pcm"})
        return AbortObservation(
            tuple(attempts),
            before,
            after,
            memory_before,
            memory_after,
            ids,
            None if served.ok else served.brief(),
            device=self.source_device,
        )

    @observes(BadRequestsObservation)
    def bad_requests_observation(self) -> BadRequestsObservation:
        fields = set(self.discover().get("fields", []))
        unsupported = next(f for f in UNSUPPORTED_FORMATS if f not in self.formats)
        cases = []
        for case in bad_requests(unsupported, self.oversized_chars):
            if case.needs and case.needs not in fields:
                continue  # the server does not offer the field: it may well accept the request
            answer = self.speech(case.fields, timeout=self.bad_timeout)
            cases.append(BadRequest(case.what, answer.status, answer.error, answer.message(), answer.brief()))
        after = self.speech({"input": STILL_SERVING, "response_format": "pcm"})
        return BadRequestsObservation(tuple(cases), after.status if after.error is None else None, after.brief())

    @observes(PerfObservation)
    def perf_observation(self) -> PerfObservation:
        sr = self.need_sample_rate()
        mode = "audio" if self.stream_formats is None or "audio" in self.stream_formats else "sse"
        rounds = []
        for level in self.concurrency:
            body = {"response_format": "pcm", "stream": True, **({"stream_format": "audio"} if mode == "audio" else {})}
            answers = self.at_once([{**body, "input": TEXTS[i % len(TEXTS)]} for i in range(level)])
            timings = []
            for i, answer in enumerate(answers):
                if not answer.ok:
                    timings.append(Timing(f"request {i}", 0.0, None, error=answer.brief()))
                    continue
                chunks, cut = _streamed(mode, answer)
                if cut:
                    timings.append(Timing(f"request {i}", 0.0, answer.latency, error=cut))
                    continue
                chunks = [(at, piece) for at, piece in chunks if piece]
                seconds = sum(len(p) for _, p in chunks) / 2 / sr
                arrivals, sizes = tuple(at for at, _ in chunks), tuple(len(p) for _, p in chunks)
                audio = self.audio(f"c{level}-{i}", decode.pcm(b"".join(p for _, p in chunks)))
                timings.append(Timing(f"request {i}", seconds, answer.latency, arrivals, sizes, audio=audio))
            rounds.append(PerfRound(f"c={level}", tuple(timings), units_per_s=sr * 2))
        return PerfObservation(self.source, tuple(rounds), stream=mode)
