"""What every backend asks a model: the one set of request texts, and the bad requests a server must refuse.

``TEXTS`` serve the real engine (offline and served) and any URL: distinct characters and lengths, except the last
two, which share a prefix and a length, so a model whose audio depends only on the text's length gives them the same
audio (i4.concurrency names it: the text does not reach the model). The harness's tree models use
``HARNESS_TEXTS``: the harness's batch compositions need prompts of distinct lengths (a reference model of the catalog
brings its own). docs/decisions.md says why these are the texts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TEXTS = (
    "Hello there.",
    "A second, longer sentence for the engine tier.",
    "Third one!",
    "Four: the last text, with digits 0123.",
    "Four: the last text, with digits 4567.",
)
# A request long enough to be aborted (offline) or left (server) while it still streams.
LONG_TEXT = "A long sentence that streams for many steps, so that it can be aborted while it still speaks, twice over."
STILL_SERVING = "Still serving after bad requests."
HARNESS_TEXTS = (
    "Hi.",
    "Hello from vLLM-Omni.",
    "Streaming audio should sound the same as offline audio.",
    "Four requests at once.",
    "The quick brown fox jumps over the lazy dog, twice over.",
)
UNKNOWN_VOICE = "omnitts-no-such-voice"
UNSUPPORTED_FORMATS = ("xyz", "aiff", "ogg-vorbis")  # the first the server does not offer is asked for
OVERSIZED_CHARS = 100_000


@dataclass(frozen=True)
class BadCase:
    """A bad speech request: its fields beyond the request defaults (``None`` drops a default), and the request
    field it needs the server's schema to offer (a server without that field may accept the request)."""

    what: str
    fields: dict = field(default_factory=dict)
    needs: str | None = None


def bad_requests(unsupported: str, oversized_chars: int = OVERSIZED_CHARS) -> tuple[BadCase, ...]:
    return (
        BadCase("empty input", {"input": ""}),
        BadCase("missing input", {"input": None}),
        BadCase("unknown voice", {"input": "Hello.", "voice": UNKNOWN_VOICE}),
        BadCase("unsupported format", {"input": "Hello.", "response_format": unsupported}),
        BadCase(
            "streaming a compressed format", {"input": "Hello.", "response_format": "mp3", "stream": True}, "stream"
        ),
        BadCase("negative max_new_tokens", {"input": "Hello.", "max_new_tokens": -1}, "max_new_tokens"),
        BadCase("oversized input", {"input": "x " * (oversized_chars // 2)}),
    )
