"""What the harness judges of the model itself: its consumer, imports, static findings, integration, placement, the
CUDA graph; and, on the real engine, its offline example."""

from __future__ import annotations

import numpy as np

from omnitts.validators import checkids
from omnitts.validators.observations.model import (
    ConsumerObservation,
    CudaGraphObservation,
    IntegrationObservation,
    LintObservation,
    OptionalImportsObservation,
    PlacementObservation,
)
from omnitts.validators.verdicts.base import Verdict, failed, not_applicable, outcome, passed, verdict

# checklist tick -> the scaffold check's points that make it up
INTEGRATION_TICKS = {
    checkids.INTEGRATION_REGISTRY: ("registry",),
    checkids.INTEGRATION_DEPLOY: ("deploy",),
    checkids.INTEGRATION_SERVING: ("serving.", "adapter"),  # serving_speech.py points (0.20-0.26), TTS adapter (0.28+)
}
PLACEMENT_FIX = (
    "Fix: a stage input processor returns codes as lists or host tensors (the decoder moves them to its own device: "
    "`codes.to(self.decoder_device)`); a stage builds its tensors on its own weights' device, never on a fixed "
    "`cuda:N`."
)


@verdict(checkids.I2_CONSUMER_FORMS)
def consumer_forms(obs: ConsumerObservation) -> Verdict:
    """The consumer of ``multimodal_output['audio']`` handles every output form (Tensor, list of Tensors, ndarray,
    scalar, the release's offline output); the offline example runs on the real engine and writes one WAV."""
    check, metrics = checkids.I2_CONSUMER_FORMS, {"consumer": obs.consumer}
    example = obs.example
    if example is not None:
        if example.missing:
            return failed(check, example.missing, (), metrics=metrics)
        if example.error:
            return failed(
                check, f"the offline example fails on the real engine: {example.error}\n{example.traceback[-1500:]}", ()
            )
        if len(example.wavs) != 1:
            return failed(check, f"the example wrote {[w.path for w in example.wavs]}, not one WAV", ())
        wav = example.wavs[0]
        metrics["example_seconds"] = round(wav.frames / wav.sample_rate, 3) if wav.sample_rate else None
        if wav.sample_rate != obs.sample_rate or wav.frames <= 0:
            why = f"example WAV {wav.path}: {wav.frames} frames at {wav.sample_rate} Hz; the config says "
            why += f"{obs.sample_rate} Hz"
            return failed(check, why, (), metrics=metrics)
    if obs.unavailable:
        return failed(check, obs.unavailable, (), metrics=metrics)
    findings = []
    for form in obs.forms:
        if form.error is not None:
            findings.append(f"{form.name}: {form.error}")
        elif form.got.shape != form.want.shape or not np.allclose(
            form.got, form.want, atol=1e-6, rtol=0, equal_nan=True
        ):
            findings.append(f"{form.name}: returned {form.got.shape} samples, expected {form.want.shape}")
    metrics["forms"] = len(obs.forms)
    return outcome(
        check, f"I2: consumer {obs.consumer} mishandles output forms:", findings, "every output form", metrics=metrics
    )


@verdict(checkids.IMPORT_OPTIONAL_DEPS)
def optional_deps(obs: OptionalImportsObservation) -> Verdict:
    """Optional dependencies (torchaudio, torchcodec, soundfile, librosa) must not be needed to import the model."""
    if obs.unavailable:
        return not_applicable(checkids.IMPORT_OPTIONAL_DEPS, obs.unavailable)
    return outcome(
        checkids.IMPORT_OPTIONAL_DEPS,
        "optional dependency imported at module import time:",
        obs.problems,
        f"{len(obs.modules)} modules import without {', '.join(obs.blocked)}",
        metrics={"modules": list(obs.modules), "blocked": list(obs.blocked)},
    )


@verdict(checkids.STATIC_LINT)
def static_lint(obs: LintObservation) -> Verdict:
    """The static rules on the model's files; each static invariant (and deploy rule) is ticked."""
    check = checkids.STATIC_LINT
    if obs.problem:
        return failed(check, obs.problem, ())
    bad = [f for f in obs.findings if f.severity == "error"]
    fired = {f.rule for f in bad} | {f.invariant for f in bad}
    ticks = {tick: "failed" if inv in fired else "passed" for inv, tick in checkids.STATIC_INVARIANT_TICKS.items()}
    if obs.judges_deploy:
        ticks.update({rule: "failed" if rule in fired else "passed" for rule in checkids.DEPLOY_RULES})
    metrics = {
        "findings": len(obs.findings),
        "errors": len(bad),
        "rules": sorted({f.rule for f in bad}),
        "internal_errors": list(obs.internal_errors[:5]),
        "package": obs.package,
    }
    if obs.internal_errors:
        return failed(
            check, "static checks failed internally (fail closed):", obs.internal_errors, metrics=metrics, ticks=ticks
        )
    lines = [f"{f.path}:{f.line} {f.rule} [{f.invariant}] {f.message}" for f in bad]
    head = f"static checks: {len(bad)} error findings:"
    return outcome(
        check, head, lines, f"{len(obs.findings)} findings, none an error", metrics=metrics, ticks=ticks, shown=15
    )


@verdict(checkids.INTEGRATION_POINTS)
def integration_points(obs: IntegrationObservation) -> Verdict:
    """The model's integration points in its tree (registry, deploy YAML, serving), as omnitts-scaffold check sees."""
    check = checkids.INTEGRATION_POINTS
    if obs.unavailable:
        return not_applicable(check, obs.unavailable)
    if obs.problem:
        return failed(check, obs.problem, ())
    if not obs.points:
        return failed(
            check, f"integration points: omnitts-scaffold check finds no model {obs.subject!r} in {obs.root}", ()
        )
    ticks = {}
    for tick, prefixes in INTEGRATION_TICKS.items():
        mine = [p for p in obs.points if p.point.startswith(prefixes)]
        if mine:
            ticks[tick] = "failed" if any(p.gap for p in mine) else "passed"
    gaps = [f"{p.point}: {p.status} — {p.detail}" for p in obs.points if p.gap]
    return outcome(
        check,
        f"integration points of {obs.subject}: {len(gaps)} gap(s)",
        gaps,
        f"{len(obs.points)} points present",
        metrics={"points": {p.point: p.status for p in obs.points}, "gaps": gaps},
        ticks=ticks,
        shown=len(gaps),
    )


@verdict(checkids.DEVICE_PLACEMENT)
def device_placement(obs: PlacementObservation) -> Verdict:
    """Each stage's outputs stay on its device; what a stage input processor hands the next stage is on the host."""
    check = checkids.DEVICE_PLACEMENT
    if obs.unavailable:
        return not_applicable(check, obs.unavailable)
    metrics = {"stage_devices": list(obs.stage_devices), "split": len(set(obs.stage_devices)) > 1}
    metrics["findings"] = len(obs.findings)
    if obs.findings:
        stages = ", ".join(obs.stage_devices)
        head = f"device placement: {len(obs.findings)} tensors off their stage's device (stages on {stages}):"
        return failed(check, head, [*obs.findings[:12], PLACEMENT_FIX], metrics=metrics, shown=13)
    return passed(check, "every stage's tensors stayed on its device", metrics=metrics)


@verdict(checkids.CUDA_GRAPH_REPLAY)
def cuda_graph_replay(obs: CudaGraphObservation) -> Verdict:
    """The AR step captured and replayed gives the same tokens as eager (speedup reported)."""
    check = checkids.CUDA_GRAPH_REPLAY
    if obs.unavailable:
        return not_applicable(check, obs.unavailable)
    metrics = dict(obs.timings or {}, tokens_equal=obs.tokens_equal)
    if not obs.tokens_equal:
        return failed(
            check, f"CUDA graph: replayed tokens differ from eager for {list(obs.differing)}", (), metrics=metrics
        )
    return passed(check, "replayed tokens equal eager", metrics=metrics)
