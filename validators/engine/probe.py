"""``omnitts-probe``: the server checks against any running ``/v1/audio/speech`` server, model-agnostic.

The URL backend (``validators/backends/url.py``) observes over HTTP; each check's verdict is the one every tier uses
(``validators/verdicts``), reported under the same check id. Writes ``report.json``, ``report.md`` and each
request's audio under ``audio/``. TTFP, RTF and underrun follow ``vllm bench serve --omni``
(vllm_omni/benchmarks/patch/patch.py, ``async_request_openai_audio_speech`` and benchmarks/audio_continuity.py of
0.30.0); see docs/probe.md.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from omnitts.validators import checkids
from omnitts.validators.backends.base import judge
from omnitts.validators.backends.url import ProbeError, UrlBackend
from omnitts.validators.engine import diagnostics
from omnitts.validators.observations.audio import RequestAudio
from omnitts.validators.verdicts.base import Verdict
from omnitts.validators.verdicts.compare import nondeterminism
from omnitts.validators.verdicts.perf import UNDERRUN_BUDGET_S
from omnitts.validators.verdicts.tolerances import tolerance

__all__ = ["STEPS", "CheckResult", "Probe", "ProbeError", "markdown"]

# the probe's checks, in the order they run, and what the report calls each: NaN/Inf first, so that the checks that
# compare audio say "not judged" rather than misread it
STEPS = (
    (checkids.AUDIO_FINITE, "NaN/Inf"),
    (checkids.SERVER_RESPONSE_FORMATS, "response formats"),
    (checkids.I1_STREAM_EQUALS_OFFLINE, "streaming"),
    (checkids.I1_NO_REPLAY, "replays"),
    (checkids.I1_SEAMS, "seams"),
    (checkids.I4_CONCURRENCY, "concurrency"),
    (checkids.I4_SEED_DETERMINISM, "fixed seed"),
    (checkids.SERVER_BAD_REQUESTS, "bad requests"),
    (checkids.I5_ABORT_RECOVERY, "aborts"),
    (checkids.AUDIO_GATES, "audio gates"),
    (checkids.PERF_RTF_TTFA, "TTFP/RTF/underrun"),
)


@dataclass
class CheckResult:
    check: str  # the omnitts check id
    step: str  # the probe step that ran it
    passed: bool
    message: str
    details: dict = field(default_factory=dict)
    outcome: str = ""  # passed / failed / not applicable (the verdict's)


class Probe:
    """The server checks against ``url`` serving ``model``; ``run()`` returns the report and writes it to ``out``."""

    def __init__(self, url: str, model: str, out: Path, **backend_options) -> None:
        self.backend = UrlBackend(url, model, **backend_options)
        self.out = Path(out)
        _check_out(self.out)
        self.results: list[CheckResult] = []
        self._saved = itertools.count()
        self.wavs: dict[str, str] = {}  # "folder/name" of each WAV a verdict named -> where it was written
        self._saved_requests: dict[int, RequestAudio] = {}  # kept, so that an id is never reused

    def save(self, name: str, samples: np.ndarray, sr: int | None) -> str:
        import soundfile as sf

        path = self.out / "audio" / f"{next(self._saved):03d}-{name}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(str(path), np.clip(samples, -1.0, 1.0), sr or 16000, subtype="PCM_16")
        return str(path.relative_to(self.out))

    def _save_requests(self, observation) -> None:
        """Every request's audio an observation holds (each once)."""
        seen = self._saved_requests

        def walk(value) -> None:
            if isinstance(value, RequestAudio):
                if id(value) not in seen and value.size:
                    seen[id(value)] = value
                    path = self.save(_safe(value.request), value.samples, value.sample_rate)
                    self.wavs.setdefault(f"request/{value.request}", path)
            elif dataclasses.is_dataclass(value):
                for f in dataclasses.fields(value):
                    walk(getattr(value, f.name))
            elif isinstance(value, (tuple, list)):
                for item in value:
                    walk(item)

        walk(observation)

    def check(self, check: str, step: str) -> CheckResult:
        self.backend.observed.clear()
        try:
            verdict: Verdict = judge(self.backend, check)
        except ProbeError:
            raise
        except Exception as exc:  # fail closed: an error inside a check is that check's failure
            result = CheckResult(check, step, False, f"probe error: {type(exc).__name__}: {exc}")
        else:
            paths = {id(w): self.save(_safe(f"{w.folder}-{w.name}"), w.samples, w.sample_rate) for w in verdict.wavs()}
            self.wavs.update({f"{w.folder}/{w.name}": paths[id(w)] for w in verdict.wavs()})
            message = verdict.message(lambda w: paths[id(w)])
            result = CheckResult(check, step, verdict.outcome != "failed", message, verdict.metrics, verdict.outcome)
        for observation in self.backend.observed.values():
            self._save_requests(observation)
        self.results.append(result)
        return result

    def run(self, only: set[str] | None = None) -> dict:
        try:
            self.out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ProbeError(f"--out {str(self.out)!r} cannot be made: {exc.strerror or exc}") from None
        started = time.time()
        self.backend.discover()
        for check, step in STEPS:
            if not only or check in only:
                self.check(check, step)
        backend = self.backend
        report = {
            "url": backend.url,
            "model": backend.model,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 2),
            "request_defaults": backend.base,
            "schema": backend.schema,
            "sample_rate": backend.sample_rate,
            "deterministic": deterministic(backend),
            "passed": all(r.passed for r in self.results) and bool(self.results),
            "results": [asdict(r) for r in self.results],
            "wavs": self.wavs,
        }
        (self.out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
        (self.out / "report.md").write_text(markdown(report))
        return report


def deterministic(backend: UrlBackend) -> bool | None:
    """Whether the first solo request gave the same audio twice (None: it was not asked twice)."""
    if backend.repeat is None:
        return None
    tol = tolerance(backend.source, "audio")
    return nondeterminism(backend.repeat, tol.rtol, tol.atol) is None


def _check_out(out: Path) -> None:
    """--out must be a folder, or a path a folder can be made at (checked before any request, made by ``run``)."""
    if out.exists() and not out.is_dir():
        raise ProbeError(f"--out {str(out)!r} is a file, not a folder")
    parent = next((p for p in out.parents if p.exists()), Path("."))
    if not parent.is_dir():
        raise ProbeError(f"--out {str(out)!r}: {str(parent)!r} is a file, not a folder")
    if not os.access(parent if not out.exists() else out, os.W_OK | os.X_OK):
        raise ProbeError(f"--out {str(out)!r}: {str(parent if not out.exists() else out)!r} is not writable")


def md(text) -> str:
    """Text from outside (the model name, the URL) as literal Markdown: one line, and every mark that could open
    emphasis, a link or autolink, a table cell, a code span, an entity or HTML backslash-escaped."""
    return re.sub(r"([\\`*_{}\[\]()<>#+!|&~:])", r"\\\1", " ".join(str(text).split()))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name).strip("_")[:60] or "x"


def markdown(report: dict) -> str:
    lines = [
        f"# omnitts-probe: {md(report['model'])} at {md(report['url'])}",
        "",
        f"{report['started']}, {report['seconds']} s. Result: **{'PASS' if report['passed'] else 'FAIL'}**. "
        f"Sample rate {report['sample_rate']} Hz; deterministic: {report['deterministic']}.",
        "",
        "| check id | step | result | message |",
        "|---|---|---|---|",
    ]
    for r in report["results"]:
        said = "n/a" if r.get("outcome") == "not applicable" else "pass" if r["passed"] else "**FAIL**"
        message = " ".join(r["message"].split())
        if said == "**FAIL**" and "\n" in r["message"].strip():
            # the headline here; the whole message, one finding a line, under "What failed, in full"
            message = r["message"].strip().split("\n", 1)[0] + " (in full below)"
        message = message.replace("|", "\\|")
        lines.append(f"| `{r['check']}` | {r['step']} | {said} | {message} |")
    lines += diagnostics.sections(report)
    lines += diagnostics.failures(report)
    perf = next((r for r in report["results"] if r["check"] == checkids.PERF_RTF_TTFA), None)
    if perf and perf["details"].get("rounds"):
        lines += [
            "",
            f"## TTFP, RTF, underrun (streamed `{perf['details']['stream']}` pcm, as `vllm bench serve --omni`)",
            "",
            "| concurrency | requests | TTFP median ms | TTFP p99 ms | RTF median | RTF max | underrun max s | "
            f"within {UNDERRUN_BUDGET_S} s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for level, d in perf["details"]["rounds"].items():
            lines.append(
                f"| {level} | {len(d['requests'])} | {d['ttfa_ms'].get('median', '')} | {d['ttfa_ms'].get('p99', '')} "
                f"| {d['rtf'].get('median', '')} | {d['rtf'].get('max', '')} | {d['underrun_s'].get('max', '')} "
                f"| {d['continuous']}/{len(d['requests'])} |"
            )
    lines += ["", "Each request's audio is under `audio/`; every detail is in `report.json`.", ""]
    return "\n".join(lines)
