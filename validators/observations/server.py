"""Observations of a ``/v1/audio/speech`` server over HTTP: its response formats and how it answers bad requests."""

from __future__ import annotations

from omnitts.validators.observations.audio import Repeat, RequestAudio, Source
from omnitts.validators.observations.schema import observation


@observation
class FormatResult:
    """One response format of one text: the answer (``problem``: the request failed) and its decoded audio
    (``decode_error``: it did not decode here, ``hint`` says what would)."""

    fmt: str
    problem: str | None = None
    content_type: str | None = None
    audio: RequestAudio | None = None
    decode_error: str | None = None
    hint: str = ""


@observation
class FormatsObservation:
    """server.response_formats: every offered format of one text against its pcm. ``sample_rate`` is the one
    expected (the model's config, ``--sample-rate``, or the wav's); ``wav_sr`` the one the wav answer has."""

    source: Source
    offered: tuple[str, ...]
    sample_rate: int | None
    pcm: RequestAudio | None
    results: tuple[FormatResult, ...]
    wav_sr: int | None = None
    problem: str | None = None  # the check could not start (no wav, no sample rate)
    repeat: Repeat | None = None


@observation
class BadRequest:
    """One bad request and its answer: ``status`` (None on a transport error), ``problem`` (the transport error),
    ``message`` (the error text the body carries) and ``brief`` (status and body, for a report)."""

    what: str
    status: int | None
    problem: str | None = None
    message: str = ""
    brief: str = ""


@observation
class BadRequestsObservation:
    """server.bad_requests: each bad request, then whether a good one is still served (its status and brief)."""

    cases: tuple[BadRequest, ...]
    after_status: int | None
    after_brief: str = ""
