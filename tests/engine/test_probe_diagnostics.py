"""omnitts-probe's diagnostics against a loopback speech server with one seeded bug each: a replayed piece, a doubled
stream, a glitch at every seam, a peer's voice leaking in, a seed ignored in a batch, NaN turned into PCM, silence,
state left by clients that went away. Each is caught by its check with its diagnosis, and the report's Markdown says
where (seconds), what was asked (the text) and which WAV to open. The correct server passes every one of them.

The server speaks vLLM-Omni 0.30.0's request schema (``seed``, ``stream``, ``stream_format``) and, like a server the
tier starts with omnitts's worker extension, answers ``POST /collective_rpc`` with typed worker observations.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest

from omnitts.validators import checkids
from omnitts.validators.engine.probe import Probe
from omnitts.validators.observations import schema
from omnitts.validators.observations.state import Container, Memory, WorkerState

from .loopback import Loopback

SR, MODEL, PIECE = 16000, "tiny-tts", 1280


def voice(text: str, seed: int | None = None) -> np.ndarray:
    """Deterministic speech-like audio of a text (no period, so a repeat is a replay); a seed changes it."""
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    n = PIECE * max(3, len(text) * SR // 20 // PIECE)  # about 0.05 s per character
    x = np.convolve(rng.normal(0, 1, n + 15), np.hanning(16), mode="valid")[:n]
    if seed is not None:
        x = x + 0.5 * np.convolve(np.random.default_rng(seed).normal(0, 1, n + 15), np.hanning(16), mode="valid")[:n]
    return (0.25 * x / x.std()).astype(np.float32)


def pcm(x: np.ndarray) -> bytes:
    with np.errstate(invalid="ignore"):  # NaN to int16: what a server that does not check sends
        return (np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()


class DiagnosticsServer(Loopback):
    def __init__(self, bugs: set[str] = frozenset()) -> None:
        self.bugs, self.lock, self.count = set(bugs), threading.Lock(), 0
        self.in_flight: dict[str, str] = {}  # request id -> text, in arrival order
        self.seen: list[str] = []
        self.left: list[str] = []  # requests whose client went away (kept by the abort-leak bug)
        self.leaked: set[str] = set()  # the texts whose voice the leak bug gave to another request
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path == "/v1/models":
                    return owner.send(self, {"data": [{"id": MODEL}]})
                props = {k: {} for k in ("input", "model", "voice", "seed", "stream", "stream_format")}
                props["response_format"] = {"enum": ["wav", "pcm"]}
                return owner.send(self, {"components": {"schemas": {"SpeechRequest": {"properties": props}}}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if self.path == "/collective_rpc":
                    return owner.send(self, {"results": [owner.rpc(body["method"])]})
                owner.speech(self, body)

        super().__init__(Handler)

    @staticmethod
    def send(handler, payload, status=200, kind="application/json", raw: bytes | None = None):
        data = raw if raw is not None else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def rpc(self, method: str) -> dict:
        with self.lock:
            if method == "omnitts_state":
                keys = tuple(self.left)
                held = Container("stage0:Tiny._streams", len(keys), keys, 23808 * len(keys))
                return schema.dump(WorkerState((held,), tuple(self.seen), tuple(self.seen)))
            if method == "omnitts_memory":
                return schema.dump(Memory(10**8, 23808 * len(self.left)))
        return {"ok": True}

    def audio(self, rid: str, text: str, seed: int | None) -> np.ndarray:
        with self.lock:
            peers = sorted(self.in_flight.values())  # the broadcast conditioning: the first in text order
            drawn = len(self.in_flight) - list(self.in_flight).index(rid)
        x = voice(text, seed)
        if "leak" in self.bugs and len(peers) > 1 and peers[0] != text:
            x = voice(peers[0])[: x.size]  # the first request's conditioning, broadcast to the batch
            with self.lock:
                self.leaked.add(peers[0])  # which peers overlap is up to the scheduler, so the test asks the server
        if "seed" in self.bugs and seed is not None and drawn > 1:
            x = voice(text, seed + drawn)  # drawn after its peers from one generator
        if "nan" in self.bugs:
            x = np.full(x.size, np.nan, dtype=np.float32)
        if "silence" in self.bugs:
            x = np.zeros(x.size, dtype=np.float32)
        return x

    def speech(self, handler, body: dict) -> None:
        text = body.get("input") or ""
        with self.lock:
            self.count += 1
            rid = f"req-{self.count}-{zlib.crc32(text.encode()):08x}"
            self.seen.append(rid)
            self.in_flight[rid] = text
        time.sleep(0.05)  # requests overlap
        try:
            x = self.audio(rid, text, body.get("seed"))
            if not body.get("stream"):
                if body.get("response_format") == "wav":
                    import io

                    import soundfile as sf

                    buf = io.BytesIO()
                    sf.write(buf, x, SR, format="WAV", subtype="PCM_16")
                    return self.send(handler, None, kind="audio/wav", raw=buf.getvalue())
                return self.send(handler, None, kind="audio/pcm", raw=pcm(x))
            self.stream(handler, body, rid, x)
        finally:
            with self.lock:
                self.in_flight.pop(rid, None)

    def stream(self, handler, body: dict, rid: str, x: np.ndarray) -> None:
        pieces = [x[i : i + PIECE].copy() for i in range(0, x.size, PIECE)]
        if "seam" in self.bugs:
            for p in pieces:
                ramp = np.linspace(0, 1, 64)
                p[:64] *= ramp
                p[-64:] *= ramp[::-1]
        if "replay" in self.bugs and len(pieces) > 3:
            pieces.insert(3, pieces[1])  # the piece two back, sent again
        if "doubled" in self.bugs:
            pieces[-1] = np.concatenate([pieces[-1], x])  # the last piece carries the whole again
        raw = body.get("stream_format") == "audio"
        handler.send_response(200)
        handler.send_header("Content-Type", "audio/pcm" if raw else "text/event-stream")
        handler.end_headers()
        try:
            for piece in pieces:
                data = pcm(piece)
                if not raw:
                    event = json.dumps({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()})
                    data = f"event: speech.audio.delta\ndata: {event}\n\n".encode()
                handler.wfile.write(data)
                handler.wfile.flush()
                time.sleep(0.01)
            if not raw:
                handler.wfile.write(b'event: speech.audio.done\ndata: {"type":"speech.audio.done"}\n\n')
        except (BrokenPipeError, ConnectionResetError):
            if "abort-leak" in self.bugs:
                with self.lock:
                    self.left.append(rid)


ONLY = set(checkids.DIAGNOSTICS)


def probe(tmp_path, bugs=(), rpc=True):
    with DiagnosticsServer(set(bugs)) as server:
        from omnitts.validators.backends.workers import collective_rpc

        call = (lambda method: collective_rpc(server.url, method, 10)) if rpc else None
        found = Probe(server.url, MODEL, tmp_path / "probe", timeout=30, concurrency=(1,), rpc=call).run(ONLY)
    found["leaked"] = server.leaked
    results = {r["check"]: r for r in found["results"]}
    return found, results, (tmp_path / "probe" / "report.md").read_text()


def test_a_correct_server_passes_every_diagnostic(tmp_path):
    found, results, md = probe(tmp_path)
    assert {c: (r["outcome"], r["message"][:300]) for c, r in results.items() if r["outcome"] != "passed"} == {}
    assert (
        "seeded requests in 3 compositions equal their solo runs; another seed changes the audio"
        in (results[checkids.I4_SEED_DETERMINISM]["message"])
    )
    assert results[checkids.I5_ABORT_RECOVERY]["details"]["interrupted"] >= 3
    assert "## Audio gates" in md and "## Aborts (9 disconnects" in md and "## Replays" not in md


def test_without_worker_rpc_the_abort_check_says_how_to_get_it(tmp_path):
    _, results, md = probe(tmp_path, rpc=False)
    aborts = results[checkids.I5_ABORT_RECOVERY]
    assert aborts["outcome"] == "not applicable" and "--worker-rpc" in aborts["message"]
    assert "| `i5.abort_recovery` | aborts | n/a |" in md


@pytest.mark.parametrize(
    "bug, check, says, section",
    [
        (
            "replay",
            checkids.I1_NO_REPLAY,
            "REPLAY: stream samples 3840..5120 (0.240-0.320 s) (streamed piece 3) repeat its samples 1280..2560 "
            "(0.080-0.160 s), already streamed",
            "| 'A second, longer sentence for the engine tier.' | 0.24 | 0.32 | 0.08 | 3 | 1280 | `audio/",
        ),
        (
            "doubled",
            checkids.I1_NO_REPLAY,
            "(streamed piece 27) repeat its samples 0..35840 (0.000-2.240 s), already streamed",
            "## Replays",
        ),
        ("seam", checkids.I1_SEAMS, "of 27 seams: 0.080 s, 0.160 s, 0.240 s", "## Seams that stand out"),
        (
            "leak",
            checkids.I4_CONCURRENCY,
            re.compile(r"heard: samples 0\.\.(\d+) \(0\.000-[0-9.]+ s\) are '(?P<peer>[^']+)''s samples 0\.\.\1 "),
            "## Whose audio a request received",
        ),
        ("seed", checkids.I4_SEED_DETERMINISM, "SEED IGNORED IN A BATCH", "| `i4.seed_determinism` |"),
        ("nan", checkids.AUDIO_GATES, "NaN/Inf turned into 16-bit PCM", "## Audio gates"),
        ("silence", checkids.AUDIO_GATES, "SILENCE: 100% of its 20 ms frames", "## Audio gates"),
        (
            "abort-leak",
            checkids.I5_ABORT_RECOVERY,
            "after 9 aborts: stage0:Tiny._streams still holds 'req-",
            "## Aborts (9 disconnects",
        ),
    ],
)
def test_each_seeded_bug_is_caught_with_its_diagnosis(tmp_path, bug, check, says, section):
    found, results, md = probe(tmp_path, {bug})
    result = results[check]
    assert result["outcome"] == "failed", result["message"][:500]
    if isinstance(says, re.Pattern):  # whose voice leaked depends on which requests overlapped: the server knows
        named = {m["peer"] for m in says.finditer(result["message"])}
        assert named and named <= found["leaked"], (named, found["leaked"], result["message"][:1500])
    else:
        assert says in result["message"], result["message"][:1500]
    assert section in md, md[-3000:]
    assert "listen: audio/" in result["message"] or check == checkids.I5_ABORT_RECOVERY


def test_the_report_says_where_whose_and_what_to_free(tmp_path):
    """report.md, on a server with four seeded bugs, as a person acts on it: the overview names each failure in one
    line, then the replayed span (from, to, first heard, in seconds, the WAV), every clicking seam at its time, whose
    audio a request got (a peer's, by name and span), which entries aborted requests left, and each failure in full,
    one finding a line."""
    found, _, md = probe(tmp_path, {"replay", "seam", "leak", "abort-leak"})
    out = tmp_path / "probe"
    long = re.escape("'A second, longer sentence for the engine tier.'")
    assert (
        "| `i1.no_replay` | replays | **FAIL** | I1: the stream repeats audio it already streamed: (in full below) |"
        in md
    )

    # the replay: piece 3 resends piece 1 (0.08-0.16 s) at 0.24-0.32 s
    replay = re.search(
        rf"^\| {long} \| ([0-9.]+) \| ([0-9.]+) \| ([0-9.]+) \| \d+ \| \d+ \| `(audio/[^`]+)` \|$", md, re.M
    )
    assert replay, md
    start, end, source = (float(replay.group(i)) for i in (1, 2, 3))
    assert abs(start - 0.24) < 0.01 and abs(end - 0.32) < 0.01 and abs(source - 0.08) < 0.01
    assert (out / replay.group(4)).is_file()

    # the seams: every piece boundary (each 0.08 s), with the stream's WAV
    seams = md.split("## Seams that stand out", 1)[1].split("\n## ", 1)[0]
    times = [
        float(t) for t in re.findall(rf"^\| {long} \| ([0-9.]+) \| \d+ \| -[0-9.]+ \| [0-9.]+ \| `audio/", seams, re.M)
    ]
    assert len(times) >= 20 and {0.08, 0.16, 0.24} <= set(times), seams
    assert all(abs(t / 0.08 - round(t / 0.08)) < 0.05 for t in times), times

    # whose audio: a request's samples are a named peer's
    heard = re.findall(
        r"^\| `i4.concurrency` \| [^|]*at once[^|]* \| '([^']+)' \| "
        r"samples 0\.\.\d+ \(0\.000-[0-9.]+ s\) are '([^']+)''s "
        r"samples 0\.\.\d+ .*\| `(audio/[^`]+)` \|$",
        md,
        re.M,
    )
    assert heard and all(who != peer for who, peer, _ in heard), md
    assert {peer for _, peer, _ in heard} <= found["leaked"], (heard, found["leaked"])
    assert all((out / wav).is_file() for _, _, wav in heard)

    # the aborts: the entries to free, by container and request id
    aborts = md.split("## Aborts (9 disconnects", 1)[1].split("\n## ", 1)[0]
    assert "What still holds an aborted request" in aborts
    assert re.search(r"^\| 0 \| stage0:Tiny\._streams still holds 'req-\d+-[0-9a-f]{8}' \(", aborts, re.M), aborts
    assert "| | grew: stage0:Tiny._streams: 0 -> " in aborts

    # each failure in full, one finding a line
    full = md.split("## What failed, in full", 1)[1]
    assert "### `i1.seams` (seams)" in full
    assert re.search(r"^  stream \(sse\) .*: SEAM GLITCH at \d+ of \d+ seams: 0\.080 s, 0\.160 s", full, re.M), full
    assert re.search(r"^      heard: samples 0\.\.\d+ .* are '[^']+''s samples", full, re.M), full
