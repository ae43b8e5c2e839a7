"""I1, the streaming output contract: stream == whole output, declared semantics, reference, duration, sr."""

from __future__ import annotations

from omnitts.validators import checkids
from omnitts.validators.observations.audio import (
    DeclaredSemantics,
    DurationObservation,
    ReferenceObservation,
    RequestAudio,
    StreamObservation,
)
from omnitts.validators.observations.model import ModelOutputsObservation
from omnitts.validators.verdicts import gate_limits
from omnitts.validators.verdicts.audio import named, unjudged
from omnitts.validators.verdicts.base import Finding, Verdict, Wav, failed, not_applicable, outcome, passed, verdict
from omnitts.validators.verdicts.compare import compare, detect_replay, nondeterminism
from omnitts.validators.verdicts.signal import align, describe_spans, find_repeats, seam_report
from omnitts.validators.verdicts.tolerances import tolerance

DONE = "speech.audio.done"


def wav(folder: str, name: str, audio: RequestAudio, sample_rate: int | None = None) -> Wav:
    return Wav(folder, name, audio.samples, audio.sample_rate or sample_rate)


@verdict(checkids.I1_STREAM_EQUALS_OFFLINE)
def stream_equals_offline(obs: StreamObservation) -> Verdict:
    """The stream's deltas, concatenated, equal the whole (offline / non-streamed) output of the same request."""
    check, tol = checkids.I1_STREAM_EQUALS_OFFLINE, tolerance(obs.source, "stream")
    context = f"{obs.context}; " if obs.context else ""
    if obs.unavailable:
        return failed(check, f"I1: {obs.unavailable}", ())
    nan = unjudged(check, [a for p in obs.pairs for a in (p.streamed, p.whole)])
    if nan:
        return nan
    findings, streams = [], {}
    for pair in obs.pairs:
        label, got, whole = pair.label, pair.streamed, pair.whole
        if pair.error or got is None or whole is None:
            findings.append(f"{label}: {pair.error or 'no audio'}")
            continue
        streams[label] = {"deltas": len(got.deltas), "samples": got.size}
        if pair.events is not None:
            errors = [e for e in pair.events if e.endswith(".error")]
            if errors:
                findings.append(f"{label}: error event {errors[0]}")
            if not pair.events or pair.events[-1] != DONE:
                findings.append(f"{label}: does not end with {DONE}: {list(pair.events[-3:])}")
            if len(got.deltas) < 2:
                findings.append(f"{label}: {len(got.deltas)} audio delta(s); a stream of this length has several")
        folder = "i1_stream_vs_offline"
        if pair.whole_chunks is not None:
            findings.append(
                Finding(
                    f"{label}: the offline output's 'audio' is a list of {pair.whole_chunks} chunks, not one waveform: "
                    f"{obs.context or 'the consolidation'} skipped the audio key, so offline consumers that take the "
                    f"value get only the last chunk ({whole.size} of {got.size} samples)",
                    (wav(folder, f"{label}_offline_last_chunk", whole), wav(folder, f"{label}_stream", got)),
                )
            )
            continue
        cmp = compare(got.samples, whole.samples, tol.rtol, tol.atol, got.pieces(), what="stream", ref="offline output")
        if not cmp:
            sr = got.sample_rate or whole.sample_rate
            sizes = () if pair.transport else got.deltas
            spans = describe_spans(align(got.samples, whole.samples, sr), sr, sizes, "stream", "whole output")
            text = f"{label}: {cmp.verdict}" + "".join(f"\n      {line}" for line in spans[:4])
            findings.append(
                Finding(text, (wav(folder, f"{label}_stream", got), wav(folder, f"{label}_offline", whole)))
            )
    unsure = nondeterminism(obs.repeat, tol.rtol, tol.atol)
    if findings and unsure:
        findings.insert(0, unsure)
    metrics = {**(obs.about or {}), "streams": streams}
    return outcome(
        check,
        f"I1: streaming and offline audio differ ({context}tolerance: {tol})",
        findings,
        f"every stream equals its whole output ({', '.join(streams)})",
        metrics=metrics,
    )


@verdict(checkids.I1_DECLARED_SEMANTICS)
def declared_semantics(obs: DeclaredSemantics) -> Verdict:
    """forward() declares delta or cumulative, and the observed per-step output matches the declaration."""
    check = checkids.I1_DECLARED_SEMANTICS
    if obs.declared is None:
        why = f"(docstring: {obs.doc[:120]!r})"
        return failed(
            check, f"I1: {obs.forward}.forward() docstring declares neither 'delta' nor 'cumulative' {why}", ()
        )
    nan = unjudged(check, [obs.longest])
    if nan:
        return nan
    replay = detect_replay(obs.longest.pieces())
    observed = "cumulative" if replay else "delta"
    metrics = {"declared": obs.declared, "observed": observed}
    if obs.declared != observed:
        found = Finding(
            f"{obs.longest.request}: {replay or 'no delta re-emits the previous one'}",
            (wav("i1_declared_semantics", obs.longest.request, obs.longest),),
        )
        return failed(
            check, f"I1: forward() declares {obs.declared!r} but behaves {observed!r}:", [found], metrics=metrics
        )
    if obs.declared == "cumulative":
        return failed(
            check,
            f"I1: forward() declares cumulative output; vLLM-Omni {obs.release} consolidation concatenates every step "
            "(offline consumers hear replays) - emit deltas",
            (),
            metrics=metrics,
        )
    return passed(check, "forward() declares delta output and emits deltas", metrics=metrics)


@verdict(checkids.I1_MATCHES_REFERENCE)
def matches_reference(obs: ReferenceObservation) -> Verdict:
    """Streamed audio == the reference implementation's audio (replay / truncation named)."""
    check = checkids.I1_MATCHES_REFERENCE
    if obs.unavailable:
        return not_applicable(check, obs.unavailable)
    nan = unjudged(check, [a for p in obs.pairs for a in (p.streamed, p.reference)])
    if nan:
        return nan
    tol = tolerance(obs.source, "audio")
    findings, keep, exact = [], [], 0
    for pair in obs.pairs:
        name, got, ref = pair.streamed.request, pair.streamed, pair.reference
        cmp = compare(got.samples, ref.samples, tol.rtol, tol.atol, got.pieces())
        listen = (wav("i1_reference", f"{name}_stream", got), wav("i1_reference", f"{name}_reference", ref))
        keep += listen
        exact += int(cmp.exact)
        if not cmp:
            spans = describe_spans(align(got.samples, ref.samples, got.sample_rate), got.sample_rate, got.deltas)
            text = f"{name}: {cmp.verdict}" + "".join(f"\n      {line}" for line in spans[:4])
            findings.append(Finding(text.replace("the whole's", "the reference's"), listen))
    metrics = {"bit_exact": f"{exact}/{len(obs.pairs)}", "rtol": tol.rtol, "atol": tol.atol}
    return outcome(
        check,
        f"I1: streamed audio differs from the reference ({tol})",
        findings,
        f"{exact}/{len(obs.pairs)} requests bit-exact, every one within {tol}",
        metrics=metrics,
        ticks={checkids.ARTIFACTS_WAV: "passed"},
        keep=tuple(keep),
    )


@verdict(checkids.I1_DURATION_AND_SR)
def duration_and_sr(obs: DurationObservation) -> Verdict:
    """duration == frames x hop_length / sample_rate where frames are counted, else a plausible length; every
    request reports the declared sample rate."""
    check, sr0, hop = checkids.I1_DURATION_AND_SR, obs.declared_sr, obs.hop_length
    if obs.counts_frames and not hop:
        why = f"I1: {obs.subject}: hop length unknown (the config has no hop_length); cannot check duration"
        return failed(check, why, ())
    findings, durations = [], {}
    for row in obs.rows:
        audio, name, sr = row.audio, row.audio.request, row.audio.sample_rate
        seconds = audio.size / (sr or sr0)
        durations[name] = round(seconds, 4)
        if sr is None or (obs.reports_offline_sr and row.offline_sr is None):
            findings.append(f"{name}: no 'sr' reported ({'stream' if sr is None else 'offline output'} lacks it)")
        elif sr != sr0 or (obs.reports_offline_sr and row.offline_sr != sr0):
            offline = f" (offline {row.offline_sr})" if obs.reports_offline_sr else ""
            findings.append(f"{name}: sample rate reported {sr}{offline}, the config says {sr0}")
        if row.frames is not None:
            want = row.frames * hop
            if audio.size != want:
                kind = "TRUNCATION" if audio.size < want else "REPLAY/EXTRA"
                text = (
                    f"{name}: {kind}: {audio.size} samples ({audio.size / sr0:.3f} s) but {row.frames} frames x hop "
                    f"{hop} = {want} samples ({want / sr0:.3f} s)"
                )
                findings.append(Finding(text, (wav("i1_duration", name, audio, sr0),)))
        elif not 0 < seconds < 60:
            findings.append(Finding(f"{name}: {seconds:.3f} s of audio", (wav("i1_duration", name, audio, sr0),)))
    metrics = {**(obs.about or {}), "durations_s": durations, "sample_rate": sr0, "hop_length": hop}
    return outcome(check, "I1: duration / sample rate", findings, f"every request at {sr0} Hz", metrics=metrics)


@verdict(checkids.I1_MODEL_OUTPUTS_EVERY_STEP)
def model_outputs_every_step(obs: ModelOutputsObservation) -> Verdict:
    """Every step of the audio stage emits model_outputs: a 1-D float32 delta per request, plus sr."""
    findings = []
    for p in obs.payloads:
        where = f"{p.request} step {p.step}"
        if p.audio_dtype is None:
            findings.append(
                f"{where}: no model_outputs tensor (payload keys {sorted(p.keys)}); a return path skipped it, the "
                "serving layer drops this step's audio"
            )
            continue
        if p.audio_dtype != "torch.float32":
            findings.append(f"{where}: audio dtype {p.audio_dtype}, expected float32 (codec decoders run in float32)")
        if len(p.audio_shape) != 1:
            findings.append(f"{where}: audio shape {p.audio_shape}, expected 1-D")
        if not p.has_sr:
            findings.append(f"{where}: no 'sr' next to model_outputs")
    findings += [f"{r}: the audio stage never produced output" for r in obs.silent]
    cuda = obs.device == "cuda" and not findings
    return outcome(
        checkids.I1_MODEL_OUTPUTS_EVERY_STEP,
        f"I1: model_outputs missing or malformed ({len(findings)} problems)",
        findings,
        "every step carries a 1-D float32 model_outputs and sr",
        metrics={"device": obs.device},
        ticks={checkids.DEVICE_CUDA: "passed"} if cuda else {},
        shown=12,
    )


def _streams(obs: StreamObservation):
    """(label, streamed audio, the model's piece sizes or () when the pieces are transport reads) of each stream."""
    for pair in obs.pairs:
        if pair.streamed is not None and pair.streamed.size and not pair.error:
            yield pair.label, pair.streamed, () if pair.transport else pair.streamed.deltas


@verdict(checkids.I1_NO_REPLAY)
def no_replay(obs: StreamObservation) -> Verdict:
    """No streamed piece repeats audio already streamed: each piece (and windows inside it) is looked for in what
    came before it by normalised cross-correlation, so a replay is found where equality within a tolerance is not
    (bf16 re-decoding, 16-bit PCM). A window that repeats itself within a pitch period is a tone, not judged."""
    check = checkids.I1_NO_REPLAY
    if obs.unavailable:
        return not_applicable(check, f"I1: {obs.unavailable}")
    nan = unjudged(check, [p.streamed for p in obs.pairs])
    if nan:
        return nan
    findings, rows, scanned = [], [], {}
    for name, got, sizes in _streams(obs):
        scan = find_repeats(got.samples, got.sample_rate, sizes)
        scanned[name] = {"windows": scan.windows, "tones": scan.periodic, "repeats": len(scan.repeats)}
        whole = next((p.whole for p in obs.pairs if p.label == name), None)
        for r in scan.repeats:
            sr = got.sample_rate
            where = ""
            if whole is not None and whole.size >= r.start + r.length:
                heard = find_repeats(whole.samples[: r.start + r.length], sr)
                if any(h.start <= r.start < h.start + h.length for h in heard.repeats):
                    where = " - the whole output repeats it too: the model emits it, not the streaming path"
            text = f"{named(got)}: REPLAY: {r.describe(sr)}{where}"
            findings.append(Finding(text, (Wav("i1_no_replay", _file(name), got.samples, sr),)))
            rows.append(
                {
                    "request": name,
                    "text": got.text,
                    "piece": r.chunk,
                    "start_s": round(r.start / sr, 3) if sr else None,
                    "end_s": round((r.start + r.length) / sr, 3) if sr else None,
                    "source_s": round(r.source / sr, 3) if sr else None,
                    "samples": r.length,
                    "wav": f"i1_no_replay/{_file(name)}",
                }
            )
    if not scanned:
        return not_applicable(check, "I1: no streamed audio to look for replays in")
    return outcome(
        check,
        "I1: the stream repeats audio it already streamed:",
        findings,
        f"{len(scanned)} streams, no piece repeats earlier audio",
        metrics={"streams": scanned, "replays": rows},
    )


def _file(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name).strip("_")[:60] or "stream"


@verdict(checkids.I1_SEAMS)
def seams(obs: StreamObservation) -> Verdict:
    """No discontinuity at the seams between the model's streamed pieces: each seam's energy change and waveform
    step against the same measures inside the pieces of the same stream; the check fails when, over every stream, a
    larger share of seams stands out than the calibrated limit (passing runs' worst share + margin)."""
    check = checkids.I1_SEAMS
    if obs.unavailable:
        return not_applicable(check, f"I1: {obs.unavailable}")
    nan = unjudged(check, [p.streamed for p in obs.pairs])
    if nan:
        return nan
    limit = gate_limits.LIMITS["seam_fraction"]
    judged, flagged, rows, per_stream = 0, [], [], {}
    for name, got, sizes in _streams(obs):
        if not sizes:
            continue
        report = seam_report(got.samples, got.sample_rate, sizes)
        judged += len(report.seams)
        per_stream[name] = {"seams": len(report.seams), "flagged": len(report.flagged)}
        sr = got.sample_rate
        for s in report.flagged:
            flagged.append((name, got, s))
            rows.append(
                {
                    "request": name,
                    "text": got.text,
                    "piece": s.piece,
                    "time_s": round(s.sample / sr, 3) if sr else None,
                    "energy_db": s.energy_db,
                    "jump": s.jump,
                    "wav": f"i1_seams/{_file(name)}",
                }
            )
    if not judged:
        why = "I1: no seams between the model's streamed pieces to judge"
        if any(p.transport for p in obs.pairs):
            why += " (a raw audio stream's pieces are transport reads, not the model's chunks)"
        return not_applicable(check, why)
    share = len(flagged) / judged
    metrics = {"seams": judged, "flagged": len(flagged), "share": round(share, 3), "limit": limit}
    metrics.update(streams=per_stream, flagged_seams=rows)
    if share <= limit:
        return passed(check, f"{judged} seams, {len(flagged)} stand out ({share:.0%} <= {limit:.0%})", metrics=metrics)
    findings, seen = [], set()
    for name, got, _ in flagged:
        if name in seen:
            continue
        seen.add(name)
        mine = [s for n, _, s in flagged if n == name]
        sr = got.sample_rate
        times = ", ".join(f"{s.sample / sr:.3f} s" if sr else f"sample {s.sample}" for s in mine[:8]) + (
            " ..." if len(mine) > 8 else ""
        )
        worst = max(mine, key=lambda s: abs(s.energy_db))
        findings.append(
            Finding(
                f"{named(got)}: SEAM GLITCH at {len(mine)} of {per_stream[name]['seams']} seams: {times} (worst: "
                f"energy {worst.energy_db:+.1f} dB against the audio around it, waveform step {worst.jump:.1f}x "
                "the median step)",
                (Wav("i1_seams", _file(name), got.samples, sr),),
            )
        )
    return failed(
        check,
        f"I1: {len(flagged)} of {judged} seams ({share:.0%}, limit {limit:.0%}) are discontinuities the pieces' "
        "interiors do not have (a dip, a burst or a step at the chunk boundary):",
        findings,
        metrics=metrics,
    )
