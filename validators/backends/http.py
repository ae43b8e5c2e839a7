"""The one HTTP client of omnitts (the server and URL backends, the engine server's health and RPC): every exchange
has a bounded time (connect, each read, the whole answer), and an HTTP error is an answer, not an exception."""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

SPEECH = "/v1/audio/speech"


@dataclass
class Answer:
    """One HTTP exchange: status (None on a transport error), body, and when each piece of the body arrived."""

    status: int | None
    headers: dict
    body: bytes
    reads: list[tuple[float, bytes]] = field(default_factory=list)  # (seconds since sent, bytes read)
    latency: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None

    def brief(self) -> str:
        return self.error or f"HTTP {self.status} {self.text()}"

    def text(self, limit: int = 200) -> str:
        """The body for a message: text as text, audio (or other binary) as its type and size."""
        kind = self.headers.get("content-type", "")
        if kind.startswith("text/html") or self.body[:15].lower().startswith((b"<!doctype html", b"<html")):
            return html_page(self.body)
        if kind.startswith(("application/json", "text/")) or not kind and self.body[:1] in (b"{", b"["):
            return self.body[:limit].decode("utf-8", "replace")
        return f"({kind or 'no content type'}, {len(self.body)} bytes)"

    def message(self) -> str:
        """The error message of a 4xx body (OpenAI/FastAPI JSON shapes or plain text)."""
        text = self.body.decode("utf-8", "replace").strip()
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

    def json(self):
        return json.loads(self.body)


@dataclass(frozen=True)
class Bound:
    """The most bytes an answer's body may have, and why that many (said when an answer passes it): a body is never
    held past its bound, however much a server sends."""

    size: int
    why: str


# JSON answers (/v1/models, /openapi.json, health, RPC results) are kilobytes; this only stops a flood
JSON_BOUND = Bound(64 << 20, "64 MiB for a JSON answer")


def html_page(body: bytes) -> str:
    """An HTML body in a message: its title, not its markup (a web server's error page, not a speech server's)."""
    found = re.search(rb"<title[^>]*>(.*?)</title", body[:65536], re.IGNORECASE | re.DOTALL)
    title = " ".join(found.group(1).decode("utf-8", "replace").split())[:80] if found else ""
    return f"an HTML page{f' titled {title!r}' if title else ''} ({len(body):,} bytes)"


def send(
    base: str,
    method: str,
    path: str,
    body: dict | None = None,
    *,
    timeout: float,
    api_key: str | None = None,
    until: bytes | None = None,
    bound: Bound = JSON_BOUND,
) -> Answer:
    """One request with a bounded time for the whole exchange and a bounded body: past ``bound`` it stops reading
    and the answer is an error, as is a body shorter than its Content-Length or a chunked body that stops before its
    last chunk. ``until``: stop reading (and close the connection, as a client that goes away) once the body holds
    these bytes."""
    url = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=timeout)
    data = json.dumps(body).encode() if body is not None else None
    reads: list[tuple[float, bytes]] = []
    started = time.perf_counter()
    status, headers, error, got = None, {}, None, 0
    expired = threading.Event()

    def expire() -> None:  # the whole exchange's bound, also while headers trickle in one by one
        expired.set()
        if conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        sent = {"Content-Type": "application/json"}
        if api_key:
            sent["Authorization"] = f"Bearer {api_key}"
        conn.request(method, path, body=data, headers=sent)
        resp = conn.getresponse()
        status, headers = resp.status, {k.lower(): v for k, v in resp.headers.items()}
        declared = resp.length  # None: chunked, or the body ends when the connection closes
        if declared is not None and declared > bound.size:
            raise _TooLarge(f"its Content-Length declares {declared:,} bytes")
        tail = b""  # the end of the body read so far, as long as ``until`` needs across reads
        while True:
            piece = resp.read1(min(65536, bound.size + 1 - got))
            now = time.perf_counter() - started
            if not piece:
                if declared is not None and resp.length:  # http.client ends a short body quietly
                    error = f"transport error: the body ended after {got:,} of its Content-Length's {declared:,} bytes"
                break
            reads.append((now, piece))
            got += len(piece)
            if got > bound.size:
                raise _TooLarge(f"{got:,} bytes arrived")
            if now > timeout:
                raise TimeoutError
            if until:
                window = tail + piece
                if until in window:
                    break
                tail = window[-(len(until) - 1) :] if len(until) > 1 else b""
    except _TooLarge as exc:
        reads.clear()  # not kept: the answer is an error either way
        error = f"answer too large: {exc}, over the bound of {bound.size:,} bytes ({bound.why}); not read further"
    except TimeoutError:
        error = f"no complete answer within {timeout:g} s (hung connection)"
    except http.client.IncompleteRead:
        error = f"transport error: the chunked body stopped after {got:,} bytes, before its last chunk"
    except (OSError, http.client.HTTPException) as exc:
        error = f"transport error: {type(exc).__name__}: {exc}"
    finally:
        watchdog.cancel()
        conn.close()
    if expired.is_set():
        error = f"no complete answer within {timeout:g} s (hung connection)"
    return Answer(status, headers, b"".join(p for _, p in reads), reads, time.perf_counter() - started, error)


class _TooLarge(Exception):
    pass
