"""Observations the harness makes of the model itself: its step payloads, its consumer, imports, lint, placement."""

from __future__ import annotations

from typing import Any

import numpy as np

from omnitts.validators.observations.schema import observation


@observation
class StepPayload:
    """One final-stage step of one request: the payload's keys and its audio tensor's dtype and shape (None: no
    audio tensor)."""

    request: str
    step: int
    keys: tuple[str, ...]
    audio_dtype: str | None
    audio_shape: tuple[int, ...] | None
    has_sr: bool


@observation
class ModelOutputsObservation:
    """i1.model_outputs_every_step. ``silent``: requests whose audio stage never produced output."""

    payloads: tuple[StepPayload, ...]
    silent: tuple[str, ...]
    device: str


@observation
class ConsumerForm:
    """The consumer given one output form: what it returned (``error``: it raised) and what it should return."""

    name: str
    want: np.ndarray
    got: np.ndarray | None = None
    error: str | None = None


@observation
class WavFile:
    path: str
    sample_rate: int
    frames: int


@observation
class ExampleRun:
    """The model's offline example run on the real engine (``missing``: the tree has none)."""

    wavs: tuple[WavFile, ...] = ()
    error: str | None = None
    traceback: str = ""
    missing: str | None = None


@observation
class ConsumerObservation:
    """i2.consumer_forms: the consumer of ``multimodal_output['audio']`` given every output form (harness), or the
    model's offline example on the real engine."""

    consumer: str | None
    forms: tuple[ConsumerForm, ...] = ()
    example: ExampleRun | None = None
    sample_rate: int | None = None
    unavailable: str | None = None  # no consumer function to give the forms to


@observation
class GraphBreaksObservation:
    found: dict[str, Any] | None
    error: str | None = None


@observation
class CudaGraphObservation:
    tokens_equal: bool
    differing: tuple[str, ...] = ()
    timings: dict[str, Any] | None = None
    unavailable: str | None = None


@observation
class OptionalImportsObservation:
    modules: tuple[str, ...]
    blocked: tuple[str, ...]
    problems: tuple[str, ...]
    unavailable: str | None = None


@observation
class LintFinding:
    path: str
    line: int
    rule: str
    invariant: str
    message: str
    severity: str = "error"


@observation
class LintObservation:
    """static.lint on the model's files; ``problem``: the static checks could not run (fail closed)."""

    package: str
    findings: tuple[LintFinding, ...] = ()
    internal_errors: tuple[str, ...] = ()
    judges_deploy: bool = False  # the model has a deploy config for the deploy rules to judge
    problem: str | None = None


@observation
class PointResult:
    point: str
    status: str
    detail: str
    gap: bool


@observation
class IntegrationObservation:
    subject: str
    root: str
    points: tuple[PointResult, ...] = ()
    problem: str | None = None
    unavailable: str | None = None


@observation
class PlacementObservation:
    stage_devices: tuple[str, ...]
    findings: tuple[str, ...]
    unavailable: str | None = None
