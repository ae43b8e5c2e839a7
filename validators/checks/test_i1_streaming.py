"""I1 — streaming output contract: stream == offline, declared semantics, reference audio, duration, sr."""

from __future__ import annotations

import pytest
import torch

from omnitts.validators import checkids
from omnitts.validators.runtime.diagnose import compare, detect_replay
from omnitts.validators.runtime.scenarios import declared_semantics, frames_for, offline_audio

pytestmark = pytest.mark.usefixtures("omnitts_model")


def _fail(lines: list[str], head: str):
    pytest.fail(head + "\n  " + "\n  ".join(lines), pytrace=False)


@pytest.mark.omnitts_check(checkids.I1_STREAM_EQUALS_OFFLINE)
def test_i1_stream_equals_offline(ctx, record):
    """Concatenated per-step deltas == the offline output of the release's consolidation (bit-exact)."""
    sub = ctx.subject
    declared, _ = declared_semantics(sub.final_stage.cls)
    problems, source = [], ""
    for ext, run in ctx.solo_runs().items():
        res = run.requests[ext]
        source = run.consolidation
        deltas = [d.reshape(-1) for d in res.deltas]
        stream = deltas[-1] if (declared == "cumulative" and deltas) else res.stream_audio
        raw = (res.offline or {}).get("audio")
        if isinstance(raw, list):
            p_str = ctx.write_audio("i1_stream_vs_offline", f"{ext}_stream", stream, res.sample_rate)
            p_last = ctx.write_audio(
                "i1_stream_vs_offline", f"{ext}_offline_last_chunk", raw[-1] if raw else [], res.sample_rate
            )
            problems.append(
                f"{ext}: the offline output's 'audio' is a list of {len(raw)} chunks, not one waveform: the "
                f"consolidation ({run.consolidation}) skipped the audio key, so offline consumers that take the value "
                f"get only the last chunk ({raw[-1].numel() if raw else 0} of {stream.numel()} samples); "
                f"listen: {p_last} vs {p_str}"
            )
            continue
        offline = offline_audio(res.offline)
        # both are built from the same per-step tensors, so anything but bit-equality is a bug
        cmp = compare(offline, stream, rtol=0.0, atol=0.0, deltas=res.deltas, what="offline output", ref="stream")
        if not cmp:
            p_off = ctx.write_audio("i1_stream_vs_offline", f"{ext}_offline", offline, res.sample_rate)
            p_str = ctx.write_audio("i1_stream_vs_offline", f"{ext}_stream", stream, res.sample_rate)
            problems.append(f"{ext}: {cmp.verdict}; listen: {p_off} vs {p_str}")
    record(pattern=sub.pattern, consolidation=source, release=ctx.profile.version, declared=declared or "undeclared")
    if problems:
        _fail(problems, f"I1: streaming and offline audio differ (consolidation: {source}; tolerance: bit-exact)")


@pytest.mark.omnitts_check(checkids.I1_DECLARED_SEMANTICS)
def test_i1_declared_semantics(ctx, record):
    """forward() declares delta or cumulative, and the observed per-step output matches the declaration."""
    sub = ctx.subject
    cls = sub.final_stage.cls
    declared, doc = declared_semantics(cls)
    if declared is None:
        pytest.fail(
            f"I1: {cls.__module__}.{cls.__qualname__}.forward() docstring declares neither 'delta' nor "
            f"'cumulative' (docstring: {doc[:120]!r})",
            pytrace=False,
        )
    runs = ctx.solo_runs()
    longest = max(runs, key=lambda e: len(runs[e].requests[e].deltas))
    res = runs[longest].requests[longest]
    replay = detect_replay(res.deltas)
    observed = "cumulative" if replay else "delta"
    record(declared=declared, observed=observed)
    if declared != observed:
        p = ctx.write_run("i1_declared_semantics", runs[longest])
        pytest.fail(
            f"I1: forward() declares {declared!r} but behaves {observed!r} for {longest}: "
            f"{replay or 'no delta re-emits the previous one'}; listen: {p[longest]}",
            pytrace=False,
        )
    if declared == "cumulative":
        pytest.fail(
            "I1: forward() declares cumulative output; vLLM-Omni "
            f"{ctx.profile.version} consolidation concatenates every step (offline consumers hear replays) "
            "- emit deltas",
            pytrace=False,
        )


@pytest.mark.omnitts_check(checkids.I1_MATCHES_REFERENCE)
def test_i1_matches_reference(ctx, record):
    """Streamed audio == the HF-style reference implementation's audio (replay / truncation named)."""
    sub = ctx.subject
    if sub.reference is None:
        pytest.skip(f"{sub.name}: no reference implementation to compare with")
    tol = ctx.tolerance()
    problems, exact = [], 0
    runs = ctx.solo_runs()
    for plan in sub.prompts:
        res = runs[plan.ext_id].requests[plan.ext_id]
        with ctx.guard(f"reference implementation for {plan.ext_id}"):
            ref = torch.as_tensor(sub.reference(plan)).reshape(-1).float()
        got = res.stream_audio
        cmp = compare(got, ref, deltas=res.deltas, **tol)
        ctx.write_audio("i1_reference", f"{plan.ext_id}_reference", ref, sub.sample_rate)
        p_got = ctx.write_audio("i1_reference", f"{plan.ext_id}_stream", got, res.sample_rate)
        exact += int(cmp.exact)
        if not cmp:
            problems.append(f"{plan.ext_id}: {cmp.verdict}; listen: {p_got} (reference next to it)")
    record(
        bit_exact=f"{exact}/{len(sub.prompts)}",
        rtol=tol["rtol"],
        atol=tol["atol"],
        extra_checks={checkids.ARTIFACTS_WAV: "passed"},
    )
    if problems:
        _fail(problems, f"I1: streamed audio differs from the reference (rtol={tol['rtol']:g}, atol={tol['atol']:g})")


@pytest.mark.omnitts_check(checkids.I1_DURATION_AND_SR)
def test_i1_duration_and_sr(ctx, record):
    """duration == frames x hop_length / sample_rate for every request; the sample rate is reported."""
    sub = ctx.subject
    if not sub.hop_length:
        pytest.fail(
            f"I1: {sub.name}: hop length unknown (the config has no hop_length); cannot check duration", pytrace=False
        )
    problems, durations = [], {}
    for ext, run in ctx.solo_runs().items():
        res = run.requests[ext]
        frames = frames_for(sub, res)
        want = frames * sub.hop_length
        got = res.stream_audio.numel()
        sr = res.sample_rate
        off_sr = (res.offline or {}).get("sr")
        durations[ext] = round(got / (sr or sub.sample_rate), 4)
        if sr is None or off_sr is None:
            problems.append(f"{ext}: no 'sr' reported ({'stream' if sr is None else 'offline output'} lacks it)")
        elif int(torch.as_tensor(off_sr).reshape(-1)[-1]) != sub.sample_rate or sr != sub.sample_rate:
            problems.append(f"{ext}: sample rate reported {sr} (offline {off_sr}), config says {sub.sample_rate}")
        if got != want:
            p = ctx.write_audio("i1_duration", ext, res.stream_audio, sr or sub.sample_rate)
            kind = "TRUNCATION" if got < want else "REPLAY/EXTRA"
            problems.append(
                f"{ext}: {kind}: {got} samples ({got / sub.sample_rate:.3f} s) but {frames} frames x hop "
                f"{sub.hop_length} = {want} samples ({want / sub.sample_rate:.3f} s); listen: {p}"
            )
    record(durations_s=durations, sample_rate=sub.sample_rate, hop_length=sub.hop_length)
    if problems:
        _fail(problems, "I1: duration / sample rate")


@pytest.mark.omnitts_check(checkids.I1_MODEL_OUTPUTS_EVERY_STEP)
def test_i1_model_outputs_every_step(ctx, record):
    """Every step of the audio stage emits model_outputs: a 1-D float32 delta per request, plus sr."""
    problems = []
    for ext, run in ctx.solo_runs().items():
        res = run.requests[ext]
        for j, payload in enumerate(res.payloads):
            val = payload.get("model_outputs", payload.get("audio"))
            if not isinstance(val, torch.Tensor):
                problems.append(
                    f"{ext} step {j}: no model_outputs tensor (payload keys {sorted(payload)}); "
                    "a return path skipped it, the serving layer drops this step's audio"
                )
                continue
            if val.dtype != torch.float32:
                problems.append(
                    f"{ext} step {j}: audio dtype {val.dtype}, expected float32 (codec decoders run in float32)"
                )
            if val.dim() != 1:
                problems.append(f"{ext} step {j}: audio shape {tuple(val.shape)}, expected 1-D")
            if "sr" not in payload:
                problems.append(f"{ext} step {j}: no 'sr' next to model_outputs")
        if not res.payloads:
            problems.append(f"{ext}: the audio stage never produced output")
    record(
        device=ctx.options.device,
        extra_checks={checkids.DEVICE_CUDA: "passed"} if ctx.options.device == "cuda" and not problems else None,
    )
    if problems:
        _fail(problems[:12], f"I1: model_outputs missing or malformed ({len(problems)} problems)")
