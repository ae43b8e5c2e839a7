"""The server checks against any running ``/v1/audio/speech`` server (``omnitts-probe``), model-agnostic.

Only HTTP: the probe never imports vLLM-Omni, so a contributor aims it at their real model on their own GPU. What
the server offers (response formats, ``stream_format``, ``seed``) is read from its ``/openapi.json`` when it has one.
Every check reports under the check ids of the rest of omnitts (``server.response_formats``,
``i1.stream_equals_offline``, ``i4.concurrency``, ``server.bad_requests``, ``perf.rtf_ttfa``). Every request has a
bounded time: a server that never answers fails its check, it does not hang the probe.

TTFP, RTF and underrun follow ``vllm bench serve --omni`` (vllm_omni/benchmarks/patch/patch.py,
``async_request_openai_audio_speech`` and benchmarks/audio_continuity.py of 0.30.0); see docs/probe.md.
"""

from __future__ import annotations

import base64
import http.client
import itertools
import json
import statistics
import threading
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from omnitts.validators.engine import audio

SPEECH = "/v1/audio/speech"
FORMATS = ("wav", "pcm", "flac", "mp3", "opus")
LOSSY = {"mp3": 0.1, "opus": 0.1}  # encoder delay / frame padding allowed, in seconds
OPUS_RATES = {8000, 12000, 16000, 24000, 48000}
MP3_RATES = {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}
RTOL, ATOL = 1e-3, 1e-4  # the engine tier's tolerances (16-bit PCM quantisation is 3e-5)
DISTINCT_ATOL = 1e-3
UNDERRUN_BUDGET_S = 0.1  # vllm bench's default audible-gap budget (AUDIO_CONTINUITY_DEFAULT_THRESHOLD_S)
TEXTS = (
    "Hello there.",
    "A second, longer sentence for the probe.",
    "Third one!",
    "Four: the last text, with digits 0123.",
)
UNKNOWN_VOICE = "omnitts-no-such-voice"


class ProbeError(RuntimeError):
    """The probe cannot start: no server at the URL, or the model is not served there (one line)."""


@dataclass
class Answer:
    """One HTTP exchange: status (None on a transport error), body, and when each piece of the body arrived."""

    status: int | None
    headers: dict
    body: bytes
    reads: list[tuple[float, bytes]] = field(default_factory=list)  # (seconds since sent, bytes read)
    latency: float = 0.0
    error: str | None = None

    def brief(self) -> str:
        if self.error:
            return self.error
        return f"HTTP {self.status} {self.text()}"

    def text(self, limit: int = 200) -> str:
        """The body for a message: text as text, audio (or other binary) as its type and size."""
        kind = self.headers.get("content-type", "")
        if kind.startswith(("application/json", "text/")) or not kind and self.body[:1] in (b"{", b"["):
            return self.body[:limit].decode("utf-8", "replace")
        return f"({kind or 'no content type'}, {len(self.body)} bytes)"


def send(base: str, method: str, path: str, body: dict | None, *, timeout: float, api_key: str | None = None) -> Answer:
    """One request with a bounded time for the whole exchange (connect, first byte, every read, total)."""
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    reads: list[tuple[float, bytes]] = []
    started = time.perf_counter()
    status, headers = None, {}
    try:
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        status, headers = resp.status, {k.lower(): v for k, v in resp.headers.items()}
        while True:
            piece = resp.read1(65536)
            now = time.perf_counter() - started
            if not piece:
                break
            reads.append((now, piece))
            if now > timeout:
                raise TimeoutError
    except TimeoutError:
        return Answer(
            status,
            headers,
            b"".join(p for _, p in reads),
            reads,
            time.perf_counter() - started,
            f"no complete answer within {timeout:g} s (hung connection)",
        )
    except (OSError, http.client.HTTPException) as exc:
        return Answer(
            status,
            headers,
            b"".join(p for _, p in reads),
            reads,
            time.perf_counter() - started,
            f"transport error: {type(exc).__name__}: {exc}",
        )
    finally:
        conn.close()
    return Answer(status, headers, b"".join(p for _, p in reads), reads, time.perf_counter() - started)


def sse_events(reads: list[tuple[float, bytes]]) -> list[tuple[float, str, dict]]:
    """(arrival seconds, event type, data) of each complete SSE event, timed by the read that completed it."""
    events, buffer = [], b""
    for at, piece in reads:
        buffer += piece
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            fields = dict(line.split(": ", 1) for line in block.decode("utf-8", "replace").splitlines() if ": " in line)
            if "event" in fields or "data" in fields:
                try:
                    data = json.loads(fields.get("data", "{}"))
                except json.JSONDecodeError:
                    data = {"raw": fields.get("data", "")}
                events.append((at, fields.get("event") or data.get("type", ""), data))
    return events


def underrun(arrivals: list[float], sizes: list[int], bytes_per_s: float) -> tuple[float, int]:
    """Worst playback deficit (s) and deficit count of a stream, as vllm bench's audio continuity defines them:
    playback starts when the first chunk arrives and consumes ``bytes_per_s``; at each later chunk's arrival the
    deficit is what playback would have consumed minus what had arrived before that chunk."""
    if not arrivals or bytes_per_s <= 0:
        return 0.0, 0
    worst, count, received = 0.0, 0, 0
    for i, (at, size) in enumerate(zip(arrivals, sizes, strict=True)):
        if i:
            deficit = ((at - arrivals[0]) * bytes_per_s - received) / bytes_per_s
            if deficit > 0:
                worst, count = max(worst, deficit), count + 1
        received += size
    return worst, count


@dataclass
class CheckResult:
    check: str  # the omnitts check id
    step: str  # the probe step that ran it
    passed: bool
    message: str
    details: dict = field(default_factory=dict)


def _same(a: np.ndarray, b: np.ndarray) -> tuple[bool, str]:
    if a.shape != b.shape:
        return False, f"{a.size} vs {b.size} samples"
    diff = float(np.max(np.abs(a - b))) if a.size else 0.0
    return bool(np.allclose(a, b, rtol=RTOL, atol=ATOL)), f"max |diff| {diff:.2e}"


def _stats(values: list[float], digits: int = 4) -> dict:
    if not values:
        return {}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {
        "mean": round(statistics.fmean(values), digits),
        "median": round(statistics.median(values), digits),
        "p99": round(p99, digits),
        "max": round(ordered[-1], digits),
    }


class Probe:
    """The server checks against ``url`` serving ``model``; ``run()`` returns the report and writes it to ``out``."""

    def __init__(
        self,
        url: str,
        model: str,
        out: Path,
        *,
        timeout: float = 120.0,
        bad_timeout: float = 30.0,
        concurrency: tuple[int, ...] = (1, 4, 8),
        seed: int | None = None,
        extra: dict | None = None,
        sample_rate: int | None = None,
        av_python: str | None = None,
        oversized_chars: int = 100_000,
        api_key: str | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme != "http" or not parsed.hostname or parsed.path not in ("", "/"):
            raise ProbeError(f"--url must be http://HOST:PORT (got {url!r})")
        self.url, self.model, self.out = f"http://{parsed.netloc}", model, Path(out)
        self.timeout, self.bad_timeout, self.concurrency = timeout, bad_timeout, tuple(concurrency)
        self.av_python, self.oversized_chars, self.api_key = av_python, oversized_chars, api_key
        self.base = {"model": model, **(extra or {})}
        if seed is not None:
            self.base["seed"] = seed
        self.sample_rate = sample_rate
        self.schema: dict = {}
        self.formats: tuple[str, ...] = FORMATS
        self.stream_formats: tuple[str, ...] | None = None  # None: the schema does not say
        self.solo: dict[str, np.ndarray] = {}
        self.nondeterministic: str | None = None
        self.results: list[CheckResult] = []
        self._saved = itertools.count()

    # ------------------------------------------------------------------------------------------ plumbing
    def speech(self, body: dict, *, timeout: float | None = None) -> Answer:
        return send(
            self.url, "POST", SPEECH, {**self.base, **body}, timeout=timeout or self.timeout, api_key=self.api_key
        )

    def save(self, tag: str, samples: np.ndarray, sr: int) -> str:
        import soundfile as sf

        path = self.out / "audio" / f"{next(self._saved):03d}-{tag}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(path), np.clip(samples, -1.0, 1.0), sr, subtype="PCM_16")
        return str(path.relative_to(self.out))

    def pcm(self, answer: Answer) -> np.ndarray:
        return audio.pcm(answer.body)

    def discover(self) -> None:
        """Is a server there, does it serve the model, and what does its speech schema offer?"""
        health = send(self.url, "GET", "/v1/models", None, timeout=min(self.timeout, 30), api_key=self.api_key)
        if health.status is None:
            raise ProbeError(f"no server answers at {self.url}: {health.error}")
        if health.status in (401, 403):
            raise ProbeError(f"{self.url} refuses the probe (HTTP {health.status}): pass --api-key")
        if health.status == 200:
            try:
                served = [m.get("id") for m in json.loads(health.body).get("data", [])]
            except (ValueError, AttributeError):
                served = []
            if served and self.model not in served:
                raise ProbeError(f"model {self.model!r} is not served at {self.url}; it serves {served}")
        api = send(self.url, "GET", "/openapi.json", None, timeout=min(self.timeout, 30), api_key=self.api_key)
        if api.status == 200:
            try:
                schemas = json.loads(api.body).get("components", {}).get("schemas", {})
            except ValueError:
                schemas = {}
            request = next((s for n, s in schemas.items() if "Speech" in n and "input" in s.get("properties", {})), {})
            props = request.get("properties", {})
            self.schema = {"name": next((n for n, s in schemas.items() if s is request), None), "fields": sorted(props)}
            offered = _enum(props.get("response_format", {}))
            if offered:
                self.formats = tuple(offered)
            if "stream_format" in props:
                self.stream_formats = tuple(_enum(props["stream_format"]) or ("sse",))
            elif props:
                self.stream_formats = ("sse",) if "stream" in props else ()

    def reference(self, text: str) -> np.ndarray:
        """The solo non-streamed PCM of ``text`` (asked twice the first time: is the server deterministic?)."""
        if text not in self.solo:
            first = self.speech({"input": text, "response_format": "pcm"})
            if first.status != 200:
                raise RuntimeError(f"solo pcm of {text!r}: {first.brief()}")
            self.solo[text] = self.pcm(first)
            if self.nondeterministic is None:
                again = self.speech({"input": text, "response_format": "pcm"})
                ok, how = _same(self.pcm(again), self.solo[text]) if again.status == 200 else (False, again.brief())
                self.nondeterministic = (
                    ""
                    if ok
                    else (
                        f"two identical solo requests differ ({how}): the server is not deterministic, so equality "
                        "cannot be checked; make it so (e.g. --seed 0, or greedy sampling in --extra)"
                    )
                )
        return self.solo[text]

    def _run(self, check: str, step: str, fn) -> CheckResult:
        try:
            passed, message, details = fn()
        except Exception as exc:  # fail closed: an error inside a check is that check's failure
            passed, message, details = False, f"probe error: {type(exc).__name__}: {exc}", {}
        result = CheckResult(check, step, bool(passed), message, details)
        self.results.append(result)
        return result

    # ------------------------------------------------------------------------------------------ checks
    def check_formats(self):
        text = TEXTS[0]
        problems, details = [], {"offered": list(self.formats)}
        if "wav" in self.formats:
            wav = self.speech({"input": text, "response_format": "wav"})
            if wav.status != 200:
                return False, f"wav: {wav.brief()}", details
            samples, sr = audio.decode("wav", wav.body, 0)
            self.sample_rate = self.sample_rate or sr
            if sr != self.sample_rate:
                problems.append(f"wav: {sr} Hz, expected {self.sample_rate} Hz")
        if not self.sample_rate:
            return False, "no sample rate: the server offers no wav; pass --sample-rate for its pcm", details
        reference = self.reference(text)
        want = reference.size / self.sample_rate
        details.update(sample_rate=self.sample_rate, pcm_seconds=round(want, 4), formats={})
        if reference.size == 0:
            problems.append("pcm: no audio")
        for fmt in self.formats:
            answer = self.speech({"input": text, "response_format": fmt})
            row = {"status": answer.status, "content_type": answer.headers.get("content-type")}
            details["formats"][fmt] = row
            if answer.status != 200:
                problems.append(f"{fmt}: {answer.brief()}")
                continue
            try:
                samples, sr = audio.decode(fmt, answer.body, self.sample_rate, engine_python=self.av_python)
            except Exception as exc:
                row["error"] = str(exc)
                hint = (
                    " (PyAV is not importable here; --av-python PY decodes with another Python)"
                    if (fmt in LOSSY and self.av_python is None and not _has_av())
                    else ""
                )
                problems.append(f"{fmt}: not decodable here: {exc}{hint}")
                continue
            seconds = samples.size / sr if sr else 0.0
            row.update(sample_rate=sr, seconds=round(seconds, 4), audio=self.save(f"format-{fmt}", samples, sr))
            if samples.size == 0:
                problems.append(f"{fmt}: no audio")
                continue
            if fmt not in LOSSY and sr != self.sample_rate:
                problems.append(f"{fmt}: {sr} Hz, wav has {self.sample_rate} Hz")
            if fmt == "opus" and sr not in OPUS_RATES or fmt == "mp3" and sr not in MP3_RATES:
                problems.append(f"{fmt}: decodes at {sr} Hz, not a rate of that codec")
            if fmt == "mp3" and self.sample_rate in MP3_RATES and sr != self.sample_rate:
                problems.append(f"mp3: {sr} Hz, wav has {self.sample_rate} Hz")
            if self.nondeterministic:
                continue  # another request's duration may differ legitimately
            allowed = LOSSY.get(fmt, 0.5 / self.sample_rate)
            if abs(seconds - want) > allowed:
                problems.append(f"{fmt}: {seconds:.4f} s, pcm has {want:.4f} s")
            elif fmt not in LOSSY and sr == self.sample_rate:
                ok, how = _same(samples, reference)
                if not ok:
                    problems.append(f"{fmt}: samples differ from pcm: {how}")
        if self.nondeterministic:
            details["note"] = self.nondeterministic
        message = "; ".join(problems) or (
            f"{', '.join(self.formats)} decode at {self.sample_rate} Hz with {want:.3f} s"
            + (" (durations not compared: server not deterministic)" if self.nondeterministic else "")
        )
        return not problems, message, details

    def check_streaming(self):
        text = TEXTS[1]
        whole = self.reference(text)
        sr = self._need_sample_rate()
        details = {
            "whole_seconds": round(whole.size / sr, 4),
            "modes": {},
            "audio": self.save("stream-whole", whole, sr),
        }
        problems, modes = [], self.stream_formats
        tried = ("sse", "audio") if modes is None else modes
        if not tried:
            return False, "the server's speech schema offers no streaming (no `stream` field)", details
        for mode in tried:
            body = {"input": text, "response_format": "pcm", "stream": True}
            if mode == "audio" or self.stream_formats is not None and "stream_format" in self.schema.get("fields", []):
                body["stream_format"] = mode
            answer = self.speech(body)
            row = details["modes"][mode] = {"status": answer.status}
            if answer.status != 200 or answer.error:
                if modes is None and mode == "audio" and answer.status is not None and 400 <= answer.status < 500:
                    row["note"] = "not offered (no schema to say otherwise)"
                    continue
                problems.append(f"stream ({mode}): {answer.brief()}")
                continue
            if mode == "sse":
                events = sse_events(answer.reads)
                kinds = [kind for _, kind, _ in events]
                errors = [data for _, kind, data in events if kind.endswith(".error")]
                deltas = [d for _, kind, d in events if kind == "speech.audio.delta"]
                try:
                    streamed = audio.pcm(b"".join(base64.b64decode(d["audio"]) for d in deltas))
                except (KeyError, ValueError) as exc:
                    problems.append(f"stream (sse): a delta without base64 `audio`: {exc}")
                    continue
                row.update(deltas=len(deltas), events=sorted(set(kinds)))
                if errors:
                    problems.append(f"stream (sse): error event {errors[0]}")
                if not kinds or kinds[-1] != "speech.audio.done":
                    problems.append(f"stream (sse): does not end with speech.audio.done: {kinds[-3:]}")
            else:
                streamed = self.pcm(answer)
                row.update(reads=len(answer.reads))
            row["seconds"] = round(streamed.size / sr, 4)
            row["audio"] = self.save(f"stream-{mode}", streamed, sr)
            if streamed.size == 0:
                problems.append(f"stream ({mode}): no audio")
                continue
            ok, how = _same(streamed, whole)
            if not ok:
                kind = (
                    "truncated"
                    if streamed.size < whole.size and _same(streamed, whole[: streamed.size])[0]
                    else ("replayed/extra audio" if streamed.size > whole.size else "different audio")
                )
                problems.append(f"stream ({mode}) concatenated differs from the non-streamed audio: {kind}, {how}")
        if problems and self.nondeterministic:
            problems.append(self.nondeterministic)
        return not problems, "; ".join(problems) or f"streams ({', '.join(details['modes'])}) equal the whole", details

    def check_concurrency(self):
        sr = self._need_sample_rate()
        texts = list(TEXTS)
        solo = {t: self.reference(t) for t in texts}
        details = {"solo": {t: self.save(f"solo-{i}", a, sr) for i, (t, a) in enumerate(solo.items())}, "rounds": {}}
        problems = []
        for (ta, a), (tb, b) in itertools.combinations(solo.items(), 2):
            if a.shape == b.shape and np.allclose(a, b, atol=DISTINCT_ATOL):
                problems.append(f"{ta!r} and {tb!r} give the same audio: the text does not reach the model")
        rounds = {"4 at once": texts, "8 at once (reversed, each twice)": list(reversed(texts)) * 2}
        for name, batch in rounds.items():
            answers = self._at_once([{"input": t, "response_format": "pcm"} for t in batch])
            rows = details["rounds"][name] = []
            for i, (text, answer) in enumerate(zip(batch, answers, strict=True)):
                row = {"text": text, "status": answer.status}
                rows.append(row)
                if answer.status != 200 or answer.error:
                    problems.append(f"{name}: {text!r}: {answer.brief()}")
                    continue
                got = self.pcm(answer)
                row["audio"] = self.save(f"concurrent-{len(batch)}-{i}", got, sr)
                ok, how = _same(got, solo[text])
                row["equal_solo"] = ok
                if not ok:
                    problems.append(f"{name}: {text!r} differs from its solo run: {how}")
        if problems and self.nondeterministic:
            problems.append(self.nondeterministic)
        return (
            not problems,
            "; ".join(problems) or "4 and 8 concurrent requests equal their solo runs; texts distinct",
            details,
        )

    def check_bad_requests(self):
        unsupported = next(f for f in ("xyz", "aiff", "ogg-vorbis") if f not in self.formats)
        cases = {
            "empty input": {"input": ""},
            "missing input": {"input": None},
            "unknown voice": {"input": "Hello.", "voice": UNKNOWN_VOICE},
            "unsupported format": {"input": "Hello.", "response_format": unsupported},
            "oversized input": {"input": "x " * (self.oversized_chars // 2)},
        }
        problems, details = [], {}
        for what, body in cases.items():
            body = {k: v for k, v in body.items() if v is not None}
            if what == "missing input":
                answer = send(self.url, "POST", SPEECH, self.base, timeout=self.bad_timeout, api_key=self.api_key)
            else:
                answer = self.speech(body, timeout=self.bad_timeout)
            details[what] = {"status": answer.status, "answer": answer.text(300)}
            if answer.error:
                problems.append(f"{what}: {answer.error}")
            elif answer.status is None or not 400 <= answer.status < 500:
                problems.append(f"{what}: expected a 4xx, got {answer.brief()}")
            elif not _message(answer.body):
                problems.append(f"{what}: HTTP {answer.status} without a message")
        after = self.speech({"input": "Still serving after bad requests.", "response_format": "pcm"})
        details["still serving"] = after.status
        if after.status != 200:
            problems.append(f"the server stopped serving after the bad requests: {after.brief()}")
        return not problems, "; ".join(problems) or "every bad request got a 4xx with a message", details

    def check_perf(self):
        sr = self._need_sample_rate()
        mode = "audio" if self.stream_formats is None or "audio" in self.stream_formats else "sse"
        details, problems = {"stream": mode, "sample_rate": sr, "levels": {}}, []
        for level in self.concurrency:
            texts = [TEXTS[i % len(TEXTS)] for i in range(level)]
            body = {"response_format": "pcm", "stream": True}
            if mode == "audio":
                body["stream_format"] = "audio"
            answers = self._at_once([{**body, "input": t} for t in texts])
            rows = []
            for i, answer in enumerate(answers):
                if answer.status != 200 or answer.error:
                    problems.append(f"concurrency {level}: {answer.brief()}")
                    continue
                if mode == "audio":
                    chunks = [(at, len(piece)) for at, piece in answer.reads]
                    samples = self.pcm(answer)
                else:
                    decoded = [
                        (at, base64.b64decode(d.get("audio", "")))
                        for at, k, d in sse_events(answer.reads)
                        if k == "speech.audio.delta"
                    ]
                    chunks = [(at, len(b)) for at, b in decoded if b]
                    samples = audio.pcm(b"".join(b for _, b in decoded))
                seconds = samples.size / sr
                if not chunks or seconds <= 0:
                    problems.append(f"concurrency {level}: request {i} streamed no audio")
                    continue
                worst, events = underrun([at for at, _ in chunks], [n for _, n in chunks], sr * 2)
                rows.append(
                    {
                        "ttfp_ms": round(chunks[0][0] * 1e3, 2),
                        "latency_s": round(answer.latency, 4),
                        "audio_s": round(seconds, 4),
                        "rtf": round(answer.latency / seconds, 4),
                        "underrun_s": round(worst, 4),
                        "underrun_events": events,
                        "chunks": len(chunks),
                        "audio": self.save(f"perf-c{level}-{i}", samples, sr),
                    }
                )
            details["levels"][level] = {
                "requests": rows,
                "ttfp_ms": _stats([r["ttfp_ms"] for r in rows], 2),
                "rtf": _stats([r["rtf"] for r in rows]),
                "underrun_s": _stats([r["underrun_s"] for r in rows]),
                "continuous": sum(r["underrun_s"] <= UNDERRUN_BUDGET_S for r in rows),
            }
        summary = ", ".join(
            f"c={lvl}: TTFP median {d['ttfp_ms'].get('median')} ms, RTF median {d['rtf'].get('median')}"
            for lvl, d in details["levels"].items()
        )
        return not problems, "; ".join(problems) or f"measured (reported, no threshold): {summary}", details

    # ------------------------------------------------------------------------------------------ running
    def _need_sample_rate(self) -> int:
        if not self.sample_rate:
            wav = self.speech({"input": TEXTS[0], "response_format": "wav"})
            if wav.status != 200:
                raise RuntimeError(f"no sample rate: wav {wav.brief()}; pass --sample-rate")
            self.sample_rate = audio.decode("wav", wav.body, 0)[1]
        return self.sample_rate

    def _at_once(self, bodies: list[dict]) -> list[Answer]:
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

    STEPS = (
        ("server.response_formats", "response formats", "check_formats"),
        ("i1.stream_equals_offline", "streaming", "check_streaming"),
        ("i4.concurrency", "concurrency", "check_concurrency"),
        ("server.bad_requests", "bad requests", "check_bad_requests"),
        ("perf.rtf_ttfa", "TTFP/RTF/underrun", "check_perf"),
    )

    def run(self, only: set[str] | None = None) -> dict:
        self.out.mkdir(parents=True, exist_ok=True)
        started = time.time()
        self.discover()
        for check, step, method in self.STEPS:
            if only and check not in only:
                continue
            self._run(check, step, getattr(self, method))
        report = {
            "url": self.url,
            "model": self.model,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 2),
            "request_defaults": self.base,
            "schema": self.schema,
            "sample_rate": self.sample_rate,
            "deterministic": not self.nondeterministic if self.nondeterministic is not None else None,
            "passed": all(r.passed for r in self.results) and bool(self.results),
            "results": [asdict(r) for r in self.results],
        }
        (self.out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        (self.out / "report.md").write_text(markdown(report))
        return report


def _enum(prop: dict) -> list[str]:
    """The allowed values of a schema property (``enum`` directly or inside ``anyOf``)."""
    if "enum" in prop:
        return [str(v) for v in prop["enum"]]
    for option in prop.get("anyOf", []) + prop.get("oneOf", []):
        if "enum" in option:
            return [str(v) for v in option["enum"]]
    return []


def _message(body: bytes) -> str:
    """The error message of a 4xx body (OpenAI/FastAPI JSON shapes or plain text)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict):
        inner = data.get("error", data)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner.get("detail") or "").strip()
        return str(inner or data.get("detail") or "").strip()
    return str(data).strip()


def _has_av() -> bool:
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True


def markdown(report: dict) -> str:
    lines = [
        f"# omnitts-probe: {report['model']} at {report['url']}",
        "",
        f"{report['started']}, {report['seconds']} s. Result: **{'PASS' if report['passed'] else 'FAIL'}**. "
        f"Sample rate {report['sample_rate']} Hz; deterministic: {report['deterministic']}.",
        "",
        "| check id | step | result | message |",
        "|---|---|---|---|",
    ]
    for r in report["results"]:
        message = r["message"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{r['check']}` | {r['step']} | {'pass' if r['passed'] else '**FAIL**'} | {message} |")
    perf = next((r for r in report["results"] if r["check"] == "perf.rtf_ttfa"), None)
    if perf and perf["details"].get("levels"):
        lines += [
            "",
            f"## TTFP, RTF, underrun (streamed `{perf['details']['stream']}` pcm, as `vllm bench serve --omni`)",
            "",
            "| concurrency | requests | TTFP median ms | TTFP p99 ms | RTF median | RTF max | underrun max s | "
            f"within {UNDERRUN_BUDGET_S} s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for level, d in perf["details"]["levels"].items():
            lines.append(
                f"| {level} | {len(d['requests'])} | {d['ttfp_ms'].get('median', '')} | {d['ttfp_ms'].get('p99', '')} "
                f"| {d['rtf'].get('median', '')} | {d['rtf'].get('max', '')} | {d['underrun_s'].get('max', '')} "
                f"| {d['continuous']}/{len(d['requests'])} |"
            )
    lines += ["", "Each request's audio is under `audio/`; every detail is in `report.json`.", ""]
    return "\n".join(lines)
