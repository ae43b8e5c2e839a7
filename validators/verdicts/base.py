"""What a verdict returns (pass / fail / not applicable, with its diagnosis) and the registry of verdicts.

A verdict is a pure function of typed observations: ``@verdict(checkids.X) def f(obs: SomeObservation) -> Verdict``.
The parameters' annotations are the observations the check needs; a backend that cannot give one of them does not
run the check. Every check id has exactly one verdict (``tests/runtime/test_verdicts.py``).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from omnitts.validators import checkids

PASSED, FAILED, NOT_APPLICABLE = "passed", "failed", "not applicable"


@dataclass(frozen=True)
class Wav:
    """Audio to listen to: written by whoever reports the verdict, under ``folder/name``."""

    folder: str
    name: str
    samples: np.ndarray
    sample_rate: int | None


@dataclass(frozen=True)
class Finding:
    """One problem: its text, and the audio that shows it."""

    text: str
    listen: tuple[Wav, ...] = ()


@dataclass(frozen=True)
class Verdict:
    check: str
    outcome: str
    headline: str  # failed: what is wrong; not applicable: why; passed: a one-line summary
    findings: tuple[Finding, ...] = ()
    metrics: dict = field(default_factory=dict)
    ticks: dict[str, str] = field(default_factory=dict)  # checklist ticks reported beside the check (checkids)
    keep: tuple[Wav, ...] = ()  # audio written whatever the outcome (e.g. the reference beside the served audio)
    shown: int = 10  # findings the message shows
    warnings: tuple[Finding, ...] = ()  # reported beside the outcome, never a failure (e.g. the audio gates' warnings)

    @property
    def passed(self) -> bool:
        return self.outcome == PASSED

    def wavs(self) -> list[Wav]:
        shown = [*self.findings[: self.shown], *self.warnings[: self.shown]]
        return [*self.keep, *(w for f in shown for w in f.listen)]

    def message(self, where: Callable[[Wav], str] = lambda w: f"{w.folder}/{w.name}.wav") -> str:
        """The report: the headline, then each finding shown with where its audio was written."""
        lines = []
        warned = [Finding("warning: " + w.text, w.listen) for w in self.warnings[: self.shown]]
        for f in [*self.findings[: self.shown], *warned]:
            text = f.text
            if f.listen:
                sep = "\n      listen: " if "\n" in text else "; listen: "
                text += sep + " vs ".join(where(w) for w in f.listen)
            lines.append(text)
        return self.headline + "".join("\n  " + line for line in lines)


def passed(check: str, summary: str = "", **kw) -> Verdict:
    return Verdict(check, PASSED, summary, **kw)


def failed(check: str, headline: str, findings, **kw) -> Verdict:
    found = tuple(f if isinstance(f, Finding) else Finding(f) for f in findings)
    return Verdict(check, FAILED, headline, found, **kw)


def not_applicable(check: str, why: str, **kw) -> Verdict:
    return Verdict(check, NOT_APPLICABLE, why, **kw)


def outcome(check: str, headline: str, findings, summary: str = "", **kw) -> Verdict:
    """Failed with ``findings`` when there are any, else passed."""
    return failed(check, headline, findings, **kw) if findings else passed(check, summary, **kw)


@dataclass(frozen=True)
class Judge:
    """The verdict of one check id, and the observation types it needs (its parameters' annotations)."""

    check: str
    fn: Callable[..., Verdict]
    needs: tuple[type, ...]

    def __call__(self, observations: dict[type, object]) -> Verdict:
        return self.fn(*(observations[t] for t in self.needs))


VERDICTS: dict[str, Judge] = {}


def verdict(check: str):
    """Registers the decorated function as THE verdict of ``check`` (a second one is an error)."""

    def register(fn):
        checkids.require(check)
        if check in VERDICTS:
            raise TypeError(f"{check} has two verdicts: {VERDICTS[check].fn.__qualname__} and {fn.__qualname__}")
        hints = typing.get_type_hints(fn)
        needs = tuple(hints[p] for p in inspect.signature(fn).parameters)
        VERDICTS[check] = Judge(check, fn, needs)
        return fn

    return register
