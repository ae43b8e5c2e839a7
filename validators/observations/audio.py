"""Observations of audio: what a request produced, streamed or whole, alone or among others."""

from __future__ import annotations

from typing import Any

import numpy as np

from omnitts.validators.observations.schema import observation


@observation
class Source:
    """Who observed (``harness``, ``offline``, ``server``, ``url``) and on which device: the tolerance's key."""

    backend: str
    device: str = "cpu"


@observation
class RequestAudio:
    """One request's audio (float32 mono); ``deltas``: the sizes of its streamed pieces (empty: unknown)."""

    request: str
    samples: np.ndarray
    sample_rate: int | None = None
    deltas: tuple[int, ...] = ()
    text: str | None = None

    @property
    def size(self) -> int:
        return int(self.samples.size)

    def pieces(self) -> list[np.ndarray]:
        """The streamed pieces (the whole audio as one piece when they are not known)."""
        known = self.deltas and sum(self.deltas) == self.size
        return np.split(self.samples, np.cumsum(self.deltas)[:-1]) if known else [self.samples]


@observation
class Repeat:
    """One request asked twice alone (``again``: None when it failed with ``error``): is the server deterministic?"""

    first: RequestAudio
    again: RequestAudio | None = None
    error: str | None = None


@observation
class StreamPair:
    """A stream and the whole output of one request. ``whole_chunks``: the whole output was a list of that many chunks
    (``whole`` is its last); ``events``: the SSE event types (None: not SSE); ``error``: the request failed."""

    label: str
    streamed: RequestAudio | None = None
    whole: RequestAudio | None = None
    whole_chunks: int | None = None
    events: tuple[str, ...] | None = None
    error: str | None = None
    transport: bool = False  # the streamed pieces are transport reads (a raw audio stream), not the model's chunks


@observation
class StreamObservation:
    """Streams against their whole outputs; ``context`` names what built the whole output."""

    source: Source
    pairs: tuple[StreamPair, ...]
    context: str = ""
    repeat: Repeat | None = None
    unavailable: str | None = None
    about: dict[str, Any] | None = None  # reported as metrics as it is


@observation
class ConcurrentRound:
    """Requests served together, each named as its solo run; ``widest`` shared a batch at once, ``required`` must."""

    name: str
    requests: tuple[RequestAudio, ...]
    widest: int | None = None
    required: int | None = None
    errors: tuple[str, ...] = ()


@observation
class ConcurrencyObservation:
    """Every request's audio alone (``solo``, distinct texts) and in ``rounds``."""

    source: Source
    solo: tuple[RequestAudio, ...]
    rounds: tuple[ConcurrentRound, ...]
    subject: str = ""
    prompts: int | None = None  # requests the model under test was given (the check needs four or more)
    repeat: Repeat | None = None
    about: dict[str, Any] | None = None


@observation
class OutputsObservation:
    """audio.finite and audio.gates: every request's audio (``RequestAudio.text``: what it was asked to say).
    ``pcm``: the audio arrived as 16-bit PCM, so a NaN or Inf the model made was turned into a number on the way."""

    source: Source
    requests: tuple[RequestAudio, ...]
    pcm: bool = False
    unavailable: str | None = None


@observation
class SeedObservation:
    """i4.seed_determinism: seeded requests alone (``solo``; ``seeds``: solo label -> seed) and the same requests,
    same seeds, in ``rounds`` of other compositions; ``reseeded``: the first one alone with another seed (does the
    seed reach the model at all?). ``unavailable``: the backend cannot hand a request's seed to the model."""

    source: Source
    solo: tuple[RequestAudio, ...] = ()
    seeds: dict[str, int] | None = None
    rounds: tuple[ConcurrentRound, ...] = ()
    reseeded: RequestAudio | None = None
    unavailable: str | None = None
    about: dict[str, Any] | None = None


@observation
class DurationRow:
    """A request's audio and reported sample rate(s); ``frames``: the codec frames behind it (None: not counted)."""

    audio: RequestAudio
    offline_sr: int | None = None
    frames: int | None = None


@observation
class DurationObservation:
    """Durations and sample rates; ``counts_frames``: duration must be frames x hop."""

    subject: str
    rows: tuple[DurationRow, ...]
    declared_sr: int
    hop_length: int | None = None
    counts_frames: bool = False
    reports_offline_sr: bool = False
    about: dict[str, Any] | None = None


@observation
class DeclaredSemantics:
    """What ``forward()``'s docstring declares, and the deltas of the longest solo request."""

    forward: str  # module.qualname of the audio stage's forward owner
    declared: str | None  # "delta" | "cumulative" | None
    doc: str
    longest: RequestAudio
    release: str


@observation
class ReferencePair:
    streamed: RequestAudio
    reference: RequestAudio


@observation
class ReferenceObservation:
    """The served audio of each prompt and the reference implementation's."""

    source: Source
    pairs: tuple[ReferencePair, ...]
    unavailable: str | None = None  # no reference implementation


@observation
class ChunkPair:
    config: str  # the connector configuration ("deploy", "small_chunks")
    chunked: RequestAudio
    full: RequestAudio


@observation
class ChunkObservation:
    """Each request decoded chunk by chunk (with left context) and in one piece."""

    source: Source
    pairs: tuple[ChunkPair, ...]
    unavailable: str | None = None
    about: dict[str, Any] | None = None


@observation
class Timing:
    """Seconds from sending to the end and to each audio piece (with its size)."""

    request: str
    audio_s: float
    latency_s: float | None
    arrivals: tuple[float, ...] = ()
    sizes: tuple[int, ...] = ()
    error: str | None = None
    audio: RequestAudio | None = None  # what it streamed, where the backend keeps it


@observation
class PerfRound:
    name: str
    timings: tuple[Timing, ...]
    units_per_s: float = 0.0  # how fast playback consumes ``sizes`` (bytes of 16-bit PCM: 2 x sample rate)


@observation
class PerfObservation:
    """Timings of requests alone and together."""

    source: Source
    rounds: tuple[PerfRound, ...]
    stream: str | None = None  # how the URL backend streamed (sse / audio)
