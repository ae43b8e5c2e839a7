"""Server-sent events read as the HTML standard interprets an event stream (WHATWG HTML, "9.2.6 Interpreting an
event stream"), in time linear in the body.

Lines end with CRLF, LF or CR (a CRLF may be split between two reads); ``field:value`` drops one space after the
colon when there is one (``data:x`` and ``data: x`` are the same); a line that starts with ``:`` is a comment; the
``data`` lines of an event are joined with newlines; a blank line dispatches the event if it has data; an event the
stream never ends with a blank line is not an event. Each byte is looked at a constant number of times: a body without
a single event separator costs one join, not one rescan per read.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field

DONE = "speech.audio.done"
_BLANK_RUNS = re.compile(rb"\n\n+")  # a blank line after a blank line dispatches nothing
_BOM = b"\xef\xbb\xbf"


@dataclass
class EventStream:
    """What a body held: each dispatched event (arrival seconds of the read that completed it, type, data text), and
    whether the body stopped inside an event (bytes after the last blank line)."""

    events: list[tuple[float, str, str]] = field(default_factory=list)
    unfinished: bool = False


class Parser:
    """Feed the body's reads in order, then :meth:`close`."""

    def __init__(self) -> None:
        self.stream = EventStream()
        self._partial: list[bytes] = []  # the line not yet ended
        self._cr = False  # the last read ended with CR: a LF opening the next one ends no line
        self._first = True  # a UTF-8 byte order mark opening the stream is not part of its first line
        self._data: list[str] = []
        self._type = ""

    def feed(self, piece: bytes, at: float) -> None:
        if self._cr and piece[:1] == b"\n":
            piece = piece[1:]
        self._cr = piece[-1:] == b"\r"
        if not piece:
            return
        text = _BLANK_RUNS.sub(b"\n\n", piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n"))
        *ended, rest = text.split(b"\n")
        if ended:
            if self._partial:
                ended[0] = b"".join([*self._partial, ended[0]])
                self._partial = []
            for line in ended:
                self._line(line, at)
        if rest:
            self._partial.append(rest)

    def close(self) -> EventStream:
        self.stream.unfinished = bool(self._partial or self._data or self._type)
        return self.stream

    def _line(self, line: bytes, at: float) -> None:
        if self._first:
            self._first, line = False, line.removeprefix(_BOM)
        if not line:
            if self._data:
                self.stream.events.append((at, self._type, "\n".join(self._data)))
            self._data, self._type = [], ""
            return
        name, _, value = line.partition(b":")  # no colon: the whole line names a field with an empty value
        if name not in (b"data", b"event"):
            return  # a comment (empty name), id, retry or an unknown field: nothing the probe reads
        if value[:1] == b" ":
            value = value[1:]
        text = value.decode("utf-8", "replace")
        if name == b"data":
            self._data.append(text)
        else:
            self._type = text


def parse(reads: list[tuple[float, bytes]]) -> EventStream:
    parser = Parser()
    for at, piece in reads:
        parser.feed(piece, at)
    return parser.close()


def events(reads: list[tuple[float, bytes]]) -> list[tuple[float, str, dict]]:
    """(arrival seconds, event type, data) of each complete event; the type is the ``event`` field, else the JSON
    data's ``type``; data that is not a JSON object is kept as ``{"raw": text}``."""
    found = []
    for at, kind, text in parse(reads).events:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            data = {"raw": text}
        found.append((at, kind or str(data.get("type", "")), data))
    return found


def audio(found: list[tuple[float, str, dict]]) -> list[tuple[float, bytes]]:
    """(arrival, decoded bytes) of every ``speech.audio.delta`` event (KeyError/ValueError: a malformed one)."""
    return [(at, base64.b64decode(data["audio"])) for at, kind, data in found if kind == "speech.audio.delta"]
