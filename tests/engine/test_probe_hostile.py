"""omnitts-probe against hostile and foreign servers: it fails closed, in bounded memory and time, in one line.

Each server is a loopback stub (stdlib ``http.server`` on 127.0.0.1, a free port) that writes its answers byte by
byte, so it can lie: floods, short bodies, streams without separators or without their end, a container other than
the one asked for, malformed ``/v1/models`` and ``/openapi.json``, a web page, a chat-only API. The tests use only what
``omnitts-probe`` offers (``Probe``, ``probe_cli.main``), so each runs as well against an older probe.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import resource
import subprocess
import sys
import time
import zlib
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest
import soundfile as sf

from omnitts.validators.engine import probe_cli
from omnitts.validators.engine.probe import Probe

from .loopback import Loopback

SR = 16000
MODEL = "tiny-tts"
CHUNK = 1600  # samples a stream sends at a time
MB = 1 << 20
SPEECH = "/v1/audio/speech"


def synth(text: str) -> np.ndarray:
    n = CHUNK * (len(text) // 8 + 2)
    freq = 150 + zlib.crc32(text.encode()) % 700
    return (np.round(0.3 * np.sin(2 * np.pi * freq * np.arange(n) / SR) * 32767) / 32768).astype(np.float32)


def encode(samples: np.ndarray, fmt: str) -> bytes:
    if fmt == "pcm":
        return (samples * 32768).clip(-32768, 32767).astype("<i2").tobytes()
    buf = io.BytesIO()
    sf.write(buf, samples, SR, format={"wav": "WAV", "flac": "FLAC"}[fmt], subtype="PCM_16")
    return buf.getvalue()


def openapi(formats=("wav", "pcm", "flac"), stream_format=True, paths=(SPEECH, "/v1/models")) -> dict:
    props = {
        "input": {"type": "string"},
        "model": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "voice": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "response_format": {"type": "string", "enum": list(formats)},
        "stream": {"type": "boolean"},
    }
    if stream_format:
        props["stream_format"] = {"anyOf": [{"type": "string", "enum": ["sse", "audio"]}, {"type": "null"}]}
    return {
        "openapi": "3.1.0",
        "paths": {p: {} for p in paths},
        "components": {"schemas": {"OpenAICreateSpeechRequest": {"properties": props}}},
    }


class Stub(Loopback):
    """A speech server that is correct except where a switch says otherwise; ``raw`` routes replace any answer
    with exact bytes ((method, path) -> bytes, or a callable that writes to the socket itself)."""

    def __init__(self, **switches) -> None:
        self.s = switches
        self.raw = switches.get("raw", {})
        self.sent: list[int] = []  # bytes each flood managed to send before the client left
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                owner.route(self, "GET", None)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                owner.route(self, "POST", self.rfile.read(length))

        super().__init__(Handler)

    # ------------------------------------------------------------------ writing
    @staticmethod
    def answer(h, status: int, body: bytes, ctype: str, *, length: int | None = -1) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: {ctype}\r\nConnection: close\r\n"
        if length is not None:
            head += f"Content-Length: {len(body) if length == -1 else length}\r\n"
        h.wfile.write(head.encode() + b"\r\n" + body)

    def json(self, h, status: int, payload) -> None:
        self.answer(h, status, json.dumps(payload).encode(), "application/json")

    def flood(self, h, ctype: str, total: int, prefix: bytes = b"", *, length: int | None = None) -> None:
        """``total`` bytes as fast as the client takes them (counted), then the connection closes."""
        head = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nConnection: close\r\n"
        if length is not None:
            head += f"Content-Length: {length}\r\n"
        block, sent = b"A" * MB, 0
        try:
            h.wfile.write(head.encode() + b"\r\n" + prefix)
            while sent < total:
                h.wfile.write(block)
                sent += len(block)
        except OSError:
            pass
        self.sent.append(sent)

    # ------------------------------------------------------------------ routes
    def route(self, h, method: str, raw_body: bytes | None) -> None:
        special = self.raw.get((method, h.path))
        if callable(special):
            return special(self, h)
        if special is not None:
            return h.wfile.write(special)
        if method == "GET" and h.path == "/v1/models":
            return self.json(h, 200, {"object": "list", "data": [{"id": self.s.get("model", MODEL)}]})
        if method == "GET" and h.path == "/openapi.json":
            return self.json(h, 200, openapi(stream_format=not self.s.get("sse_only")))
        if method == "POST" and h.path == SPEECH:
            return self.speech(h, json.loads(raw_body or b"{}"))
        return self.json(h, 404, {"detail": "Not Found"})

    def speech(self, h, req: dict) -> None:
        text, fmt = req.get("input"), req.get("response_format", "wav")
        if not text:
            return self.json(h, 400, {"error": {"message": "Input text cannot be empty"}})
        if req.get("voice") not in (None, "default") or len(text) > 4096:
            return self.json(h, 400, {"error": {"message": "bad request"}})
        if fmt not in ("wav", "pcm", "flac"):
            return self.json(h, 422, {"error": {"message": f"unsupported response_format {fmt!r}"}})
        if req.get("stream"):
            if req.get("stream_format") == "audio":
                return self.raw_stream(h, text)
            return self.sse(h, text)
        if "flood" in self.s:
            return self.flood(h, f"audio/{fmt}", self.s["flood"], length=self.s.get("declared"))
        fmt_written = self.s.get("swap", {}).get(fmt, fmt)
        body = encode(synth(text), fmt_written)
        self.answer(h, 200, body, f"audio/{fmt}", length=len(body) + self.s.get("short", 0))

    def raw_stream(self, h, text: str) -> None:
        pcm = encode(synth(text), "pcm")
        short = self.s.get("stream_short", 0)
        self.answer(h, 200, b"", "audio/pcm", length=len(pcm) + short if short else None)
        for i in range(0, len(pcm), CHUNK * 2):
            h.wfile.write(pcm[i : i + CHUNK * 2])
            h.wfile.flush()
            time.sleep(0.002)

    def sse(self, h, text: str) -> None:
        style = self.s.get("sse", {})
        eol, sep = style.get("eol", b"\n"), b":" if style.get("no_space") else b": "
        self.answer(h, 200, b"", "text/event-stream", length=None)
        if "flood" in style:  # one event that never ends: no line ends at all
            return self.flood_body(h, b"data" + sep, style["flood"])
        if style.get("bom"):
            h.wfile.write(b"\xef\xbb\xbf")
        pcm = encode(synth(text), "pcm")
        events = [
            {"type": "speech.audio.delta", "audio": base64.b64encode(pcm[i : i + CHUNK * 2]).decode()}
            for i in range(0, len(pcm), CHUNK * 2)
        ]
        if not style.get("no_done"):
            events.append({"type": "speech.audio.done"})
        for event in events:
            data = json.dumps(event).encode()
            lines = [b"event" + sep + event["type"].encode()] if not style.get("no_event_field") else []
            if style.get("comments"):
                lines = [b": keep-alive", b"id" + sep + b"7", b"retry" + sep + b"100", *lines]
            if style.get("split_data"):  # one JSON value over two data lines: joined with a newline
                cut = data.index(b":")
                lines += [b"data" + sep + data[: cut + 1], b"data" + sep + data[cut + 1 :]]
            else:
                lines.append(b"data" + sep + data)
            block = eol.join(lines) + eol + eol
            if style.get("split_crlf"):  # the CRLF ending each line split between two writes
                for part in block.split(b"\n"):
                    h.wfile.write(part)
                    h.wfile.flush()
                    time.sleep(0.001)
                    h.wfile.write(b"\n")
            else:
                h.wfile.write(block)
            h.wfile.flush()
            time.sleep(0.002)

    def flood_body(self, h, prefix: bytes, total: int) -> None:
        block, sent = b"A" * MB, 0
        try:
            h.wfile.write(prefix)
            while sent < total:
                h.wfile.write(block)
                sent += len(block)
        except OSError:
            pass
        self.sent.append(sent)


def run(stub: Stub, tmp_path, only: set[str], **kw) -> dict:
    kw.setdefault("concurrency", (1, 2))
    kw.setdefault("bad_timeout", 2.0)
    kw.setdefault("timeout", 30.0)
    with stub:
        report = Probe(stub.url, stub.s.get("model", MODEL), tmp_path / "probe", **kw).run(only)
    return {r["check"]: r for r in report["results"]}


def cli(capsys, *argv: str) -> tuple[int, str]:
    """omnitts-probe in this process: its exit status and stderr (an uncaught exception fails the test)."""
    try:
        code = probe_cli.main(list(argv))
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("omnitts-probe: "), err[:2000]
    assert "Traceback" not in err
    return err


# ---------------------------------------------------------------------------------------- floods and bounds


def test_a_flood_is_cut_at_the_bound_and_never_held_whole(tmp_path):
    stub = Stub(flood=200 * MB)
    result = run(stub, tmp_path, {"server.response_formats"})["server.response_formats"]
    assert not result["passed"]
    assert "answer too large" in result["message"] and "over the bound of" in result["message"]
    assert "for 12 characters at 1 s each" in result["message"]  # the bound says where it comes from
    # the client stopped reading: the stub got rid of a few MB of its 200 (the bound plus the socket buffers)
    assert stub.sent and max(stub.sent) < 40 * MB, stub.sent


def flood_route(stub, h):
    stub.flood(h, "application/json", 2048 * MB)


@pytest.mark.parametrize("where", ["/v1/models", SPEECH])
def test_a_flood_under_a_memory_cap_is_one_answer_too_large(tmp_path, where):
    # 1 GiB of address space: a probe that holds the 2 GiB flood runs out of memory (a MemoryError, a traceback when
    # it hit discovery); one that streams it against its bound says "answer too large"
    cap = 1 << 30

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    method = "POST" if where == SPEECH else "GET"
    stub = Stub(raw={(method, where): flood_route})
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")  # no per-core buffers in the cap
    with stub:
        argv = ["--url", stub.url, "--model", MODEL, "--out", str(tmp_path / "o"), "--check", "server.response_formats"]
        proc = subprocess.run(
            [sys.executable, "-m", "omnitts.validators.engine.probe_cli", *argv],
            preexec_fn=limit,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert "MemoryError" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "answer too large" in proc.stdout + proc.stderr
    if where == SPEECH:
        assert proc.returncode == 1 and "FAIL server.response_formats" in proc.stdout
    else:
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "/v1/models" in proc.stderr
    assert max(stub.sent) < 100 * MB, stub.sent  # the bound (4.6 MB of audio, 64 MiB of JSON) and socket buffers


def test_a_declared_flood_is_refused_before_reading(tmp_path):
    stub = Stub(flood=2 * MB, declared=10**12)
    result = run(stub, tmp_path, {"server.response_formats"}, timeout=5.0)["server.response_formats"]
    assert not result["passed"]
    assert "its Content-Length declares 1,000,000,000,000 bytes" in result["message"]


def test_sse_without_event_separators_ends_at_the_bound_in_time(tmp_path):
    # 50 MB of one `data:` line and no line end: parsed by rescanning the buffer at every read, this took half a
    # minute after every byte had arrived (the request's --timeout no longer applied)
    stub = Stub(sse={"flood": 50 * MB})
    started = time.monotonic()
    result = run(stub, tmp_path, {"i1.stream_equals_offline"}, timeout=5.0)["i1.stream_equals_offline"]
    took = time.monotonic() - started
    assert not result["passed"] and "stream (sse): answer too large" in result["message"]
    assert took < 15, f"{took:.1f} s for a 5 s --timeout"


def trickle_headers(stub, h):
    """A status line, then one header every 0.2 s for a minute: each read is quick, the answer never comes."""
    try:
        h.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for i in range(300):
            if stub.release.wait(0.2):
                return
            h.wfile.write(f"X-Wait-{i % 90}: {i}\r\n".encode())
            h.wfile.flush()
    except OSError:
        pass


def test_headers_that_trickle_in_are_bounded_by_the_whole_exchange_time(tmp_path):
    stub = Stub(raw={("POST", SPEECH): trickle_headers})
    started = time.monotonic()
    result = run(stub, tmp_path, {"server.response_formats"}, timeout=2.0)["server.response_formats"]
    took = time.monotonic() - started
    assert not result["passed"] and "no complete answer within 2 s" in result["message"]
    assert took < 12, f"{took:.1f} s for a 2 s --timeout"


def test_a_body_shorter_than_its_content_length_is_a_transport_error(tmp_path):
    # every answer equally short: equal to each other, so only the transport can tell
    result = run(Stub(short=1000), tmp_path, {"i4.concurrency"})["i4.concurrency"]
    assert not result["passed"]
    assert "the body ended after" in result["message"] and "Content-Length" in result["message"]


# ---------------------------------------------------------------------------------------- SSE by the spec


VALID_SSE = {
    "data: without a space": {"no_space": True},
    "CRLF line ends": {"eol": b"\r\n"},
    "CR line ends": {"eol": b"\r"},
    "CRLF split between reads": {"eol": b"\r\n", "split_crlf": True},
    "one JSON value over two data lines": {"split_data": True},
    "no event field (the type in the data)": {"no_event_field": True, "no_space": True},
    "comments, id and retry lines": {"comments": True, "eol": b"\r\n"},
    "a byte order mark": {"bom": True, "eol": b"\r"},
}


@pytest.mark.parametrize("style", VALID_SSE.values(), ids=VALID_SSE.keys())
def test_valid_sse_is_read_as_the_spec_says(tmp_path, style):
    result = run(Stub(sse=style), tmp_path, {"i1.stream_equals_offline"})["i1.stream_equals_offline"]
    assert result["passed"], result["message"]
    assert result["details"]["streams"]["stream (sse)"]["deltas"] >= 2


# ---------------------------------------------------------------------------------------- containers


@pytest.mark.parametrize(("asked", "written"), [("flac", "wav"), ("wav", "flac"), ("pcm", "wav")])
def test_each_format_comes_in_its_own_container(tmp_path, asked, written):
    result = run(Stub(swap={asked: written}), tmp_path, {"server.response_formats"})["server.response_formats"]
    assert not result["passed"]
    assert f"{asked} answered with a {written} container" in result["message"], result["message"]


# ---------------------------------------------------------------------------------------- truncated streams


def test_perf_fails_on_an_sse_stream_without_its_end(tmp_path):
    result = run(Stub(sse_only=True, sse={"no_done": True}), tmp_path, {"perf.rtf_ttfa"})["perf.rtf_ttfa"]
    assert not result["passed"]
    assert "truncated: the stream ends without speech.audio.done" in result["message"]


def test_perf_fails_on_a_raw_stream_shorter_than_its_content_length(tmp_path):
    result = run(Stub(stream_short=3200), tmp_path, {"perf.rtf_ttfa"})["perf.rtf_ttfa"]
    assert not result["passed"]
    assert "the body ended after" in result["message"]


# ---------------------------------------------------------------------------------------- bad arguments


BAD_ARGS = {
    "port out of range": (["--url", "http://127.0.0.1:99999"], "--url"),
    "port not a number": (["--url", "http://127.0.0.1:abc"], "--url"),
    "timeout -1": (["--timeout", "-1"], "--timeout"),
    "timeout nan": (["--timeout", "nan"], "--timeout"),
    "timeout 0": (["--timeout", "0"], "--timeout"),
    "timeout inf": (["--timeout", "inf"], "--timeout"),
    "bad-timeout 0": (["--bad-timeout", "0"], "--bad-timeout"),
    "sample rate 0": (["--sample-rate", "0"], "--sample-rate"),
}


@pytest.mark.parametrize(("args", "names"), BAD_ARGS.values(), ids=BAD_ARGS.keys())
def test_a_bad_argument_is_one_line_and_exit_2(capsys, tmp_path, args, names):
    argv = ["--url", "http://127.0.0.1:9", "--model", MODEL, "--out", str(tmp_path / "o"), *args]
    code, err = cli(capsys, *argv)
    assert code == 2 and names in one_line(err)


@pytest.mark.parametrize("under", [False, True], ids=["a file", "under a file"])
def test_an_out_that_is_a_file_is_one_line_and_exit_2(capsys, tmp_path, under):
    file = tmp_path / "report.txt"
    file.write_text("keep me\n")
    out = file / "sub" if under else file
    code, err = cli(capsys, "--url", "http://127.0.0.1:9", "--model", MODEL, "--out", str(out))
    assert code == 2 and "is a file, not a folder" in one_line(err)
    assert file.read_text() == "keep me\n"


# ---------------------------------------------------------------------------------------- malformed answers


def probe_cli_against(capsys, tmp_path, stub: Stub, *extra: str) -> tuple[int, str]:
    with stub:
        return cli(capsys, "--url", stub.url, "--model", MODEL, "--out", str(tmp_path / "o"), *extra)


MALFORMED_MODELS = {
    "data null": b'{"data": null}',
    "data a string": b'{"data": "tiny-tts"}',
    "a list": b'[{"id": "tiny-tts"}]',
    "an id not a string": b'{"data": [{"id": ["tiny-tts"]}]}',
    "not JSON": b'{"data": [',
}


@pytest.mark.parametrize("body", MALFORMED_MODELS.values(), ids=MALFORMED_MODELS.keys())
def test_a_malformed_models_list_is_one_line_and_exit_2(capsys, tmp_path, body):
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + body
    code, err = probe_cli_against(capsys, tmp_path, Stub(raw={("GET", "/v1/models"): answer}))
    assert code == 2 and "/v1/models" in one_line(err)


MALFORMED_OPENAPI = {
    "a list": b"[]",
    "components a list": b'{"components": []}',
    "schemas a list": b'{"components": {"schemas": []}}',
    "a property not an object": b'{"components": {"schemas": {"SpeechRequest": {"properties": '
    b'{"input": {}, "response_format": "wav"}}}}}',
    "an enum not a list": b'{"components": {"schemas": {"SpeechRequest": {"properties": '
    b'{"input": {}, "response_format": {"enum": 5}}}}}}',
    "paths a list": b'{"paths": ["/v1/audio/speech"]}',
    "not JSON": b"{'paths': {}}",
}


@pytest.mark.parametrize("body", MALFORMED_OPENAPI.values(), ids=MALFORMED_OPENAPI.keys())
def test_a_malformed_openapi_document_is_one_line_and_exit_2(capsys, tmp_path, body):
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + body
    code, err = probe_cli_against(capsys, tmp_path, Stub(raw={("GET", "/openapi.json"): answer}))
    assert code == 2 and "/openapi.json" in one_line(err)


def not_found(stub, h):
    stub.json(h, 404, {"detail": "Not Found"})


def test_a_server_answering_404_everywhere_could_not_start(capsys, tmp_path):
    routes = {(m, p): not_found for m in ("GET", "POST") for p in ("/v1/models", "/openapi.json", SPEECH)}
    code, err = probe_cli_against(capsys, tmp_path, Stub(raw=routes))
    assert code == 2 and f"is not a {SPEECH} server" in one_line(err) and "HTTP 404" in err


# ---------------------------------------------------------------------------------------- not a speech server


PAGE = b"<!DOCTYPE html><html><head><title>Error response</title></head><body><h1>Error</h1>" + b"<p>x</p>" * 200


def page(status: int):
    def write(stub, h):
        stub.answer(h, status, PAGE, "text/html;charset=utf-8")

    return write


WEB_SERVERS = {
    # `python -m http.server`: 404 pages for GET, 501 for POST
    "a static file server": {
        ("GET", "/v1/models"): page(404),
        ("GET", "/openapi.json"): page(404),
        ("POST", SPEECH): page(501),
    },
    # a single-page web app: the same 200 page for every GET, 405 for POST
    "a web app": {("GET", "/v1/models"): page(200), ("GET", "/openapi.json"): page(200), ("POST", SPEECH): page(405)},
    # a catch-all that answers everything with its page
    "a catch-all page": {
        ("GET", "/v1/models"): page(200),
        ("GET", "/openapi.json"): page(200),
        ("POST", SPEECH): page(200),
    },
}


@pytest.mark.parametrize("routes", WEB_SERVERS.values(), ids=WEB_SERVERS.keys())
def test_a_web_server_is_not_a_speech_server_said_once(capsys, tmp_path, routes):
    code, err = probe_cli_against(capsys, tmp_path, Stub(raw=routes))
    assert code == 2 and f"is not a {SPEECH} server" in one_line(err)
    assert "<html" not in err.lower() and "--sample-rate" not in err and "Error response" in err


def chat_openapi(stub, h):
    paths = {p: {} for p in ("/v1/chat/completions", "/v1/completions", "/v1/models", "/health")}
    stub.json(h, 200, {"openapi": "3.1.0", "paths": paths, "components": {"schemas": {}}})


@pytest.mark.parametrize("with_openapi", [True, False], ids=["its openapi", "no openapi"])
def test_a_chat_completions_api_is_not_a_speech_server(capsys, tmp_path, with_openapi):
    routes = {("GET", "/openapi.json"): chat_openapi if with_openapi else not_found, ("POST", SPEECH): not_found}
    code, err = probe_cli_against(capsys, tmp_path, Stub(raw=routes))
    assert code == 2 and f"is not a {SPEECH} server" in one_line(err)
    assert ("/v1/chat/completions" in err) if with_openapi else ("HTTP 404" in err)


# ---------------------------------------------------------------------------------------- the report


def test_the_model_name_is_text_in_report_md_not_markdown(capsys, tmp_path):
    hostile = "m|x\n\n# Injected heading\n<img src=x onerror=alert(1)> [click](http://evil.example) `code`"
    stub = Stub(model=hostile)
    with stub:
        argv = ["--url", stub.url, "--model", hostile, "--out", str(tmp_path / "o"), "--check", "server.bad_requests"]
        cli(capsys, *argv)
    report = (tmp_path / "o" / "report.md").read_text()
    head = report.splitlines()[0]
    assert not any(line.startswith("# Injected") for line in report.splitlines())
    assert not re.search(r"(?<!\\)<img", report) and "](http" not in report and "`code`" not in report
    assert r"m\|x \# Injected heading \<img src=x onerror=alert\(1\)\> \[click\]\(http\://evil.example\)" in head
