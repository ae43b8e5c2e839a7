"""Weight-free audio gates: NaN/Inf first (its own diagnosis, reported once), then silence, clipping, a constant or
DC-shifted signal and the duration per input character, against limits calibrated from passing runs.

Errors fail the check; warnings are reported beside it (a calibrated limit passed, but real voices differ from the
runs the limits come from: recalibrate with ``scripts/calibrate_gates.py`` on your model's passing runs).
Every verdict that compares audio asks :func:`unjudged` first, so a NaN is not misread as a replay, a truncation or
crosstalk by five checks at once.
"""

from __future__ import annotations

from collections.abc import Iterable

from omnitts.validators import checkids
from omnitts.validators.observations.audio import OutputsObservation, RequestAudio
from omnitts.validators.verdicts import gate_limits
from omnitts.validators.verdicts.base import Finding, Verdict, Wav, failed, not_applicable, passed, verdict
from omnitts.validators.verdicts.signal import at, gate_stats, nonfinite

# errors: no correct model makes these, whatever its voice (fixed, not calibrated)
SILENT_ERROR = 0.99  # silence ratio: the whole output is silence
SATURATED_ERROR = 0.5  # clipping ratio: half the samples at full scale
CONSTANT_STD = 1e-4  # a signal whose standard deviation is below this carries no audio (DC, or NaN made into PCM)
DURATION_ERROR_FACTOR = 10  # seconds per character this far outside the calibrated band


def named(audio: RequestAudio) -> str:
    return f"{audio.request}" + (f" ({audio.text!r})" if audio.text and repr(audio.text) != audio.request else "")


def unjudged(check: str, audios: Iterable[RequestAudio | None]) -> Verdict | None:
    """Not applicable when any of ``audios`` holds NaN/Inf: audio.finite reports it, once; comparing it here would
    blame something else."""
    bad = []
    for audio in audios:
        if audio is None:
            continue
        found = nonfinite(audio.samples)
        line = f"{audio.request} ({found[0]} NaN/Inf samples)" if found else None
        if line and line not in bad:
            bad.append(line)
    if not bad:
        return None
    return not_applicable(
        check, f"not judged: {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''} - see {checkids.AUDIO_FINITE}"
    )


def _wav(audio: RequestAudio, folder: str) -> Wav:
    return Wav(folder, audio.request, audio.samples, audio.sample_rate)


@verdict(checkids.AUDIO_FINITE)
def finite(obs: OutputsObservation) -> Verdict:
    """No NaN or Inf in any request's audio: the model's output is broken before anything else is judged."""
    check = checkids.AUDIO_FINITE
    if obs.unavailable:
        return not_applicable(check, obs.unavailable)
    findings = []
    for audio in obs.requests:
        found = nonfinite(audio.samples)
        if found:
            count, first = found
            findings.append(
                f"{named(audio)}: {count} of {audio.size} samples are NaN/Inf, the first at "
                f"{at(first, audio.sample_rate)} - the model's output itself (a decoder overflow, a division by "
                "zero, a bf16/fp16 range); every check that compares this audio says 'not judged'"
            )
    note = ""
    if obs.pcm:
        note = " (16-bit PCM: a NaN/Inf arrives as a number, which audio.gates names as silence or a constant)"
    if findings:
        return failed(check, "NaN/Inf in the model's audio:", findings, metrics={"requests": len(obs.requests)})
    return passed(check, f"{len(obs.requests)} requests, every sample finite{note}", metrics={"pcm": obs.pcm})


def _chars(audio: RequestAudio) -> int | None:
    return len(audio.text) if audio.text else None


@verdict(checkids.AUDIO_GATES)
def gates(obs: OutputsObservation) -> Verdict:
    """Silence, clipping, a constant signal, DC offset and duration per character, per request. Errors: empty,
    silent, constant, saturated, or a duration per character 10x outside the band; warnings: a calibrated limit."""
    check = checkids.AUDIO_GATES
    if obs.unavailable:
        return not_applicable(check, obs.unavailable)
    nan = unjudged(check, obs.requests)
    if nan:
        return nan
    limits = gate_limits.LIMITS
    lo, hi = limits["seconds_per_char"]
    via = " (or NaN/Inf turned into 16-bit PCM by the server, which reads as 0)" if obs.pcm else ""
    errors, warnings, rows = [], [], []
    for audio in obs.requests:
        stats = gate_stats(audio.samples, audio.sample_rate, _chars(audio))
        rows.append({"request": audio.request, "text": audio.text, **stats, "wav": f"audio_gates/{audio.request}"})
        name, listen = named(audio), (_wav(audio, "audio_gates"),)
        spc = stats["seconds_per_char"]
        if stats["samples"] == 0:
            errors.append(Finding(f"{name}: no audio at all", ()))
            continue
        if stats["silence_ratio"] >= SILENT_ERROR:
            errors.append(
                Finding(
                    f"{name}: SILENCE: {stats['silence_ratio']:.0%} of its 20 ms frames are under -60 dBFS (peak "
                    f"{stats['peak']:.2g}) - the decoder emits silence{via}",
                    listen,
                )
            )
        elif stats["std"] < CONSTANT_STD:
            errors.append(
                Finding(
                    f"{name}: CONSTANT: every sample is {stats['dc_offset']:+.4f} (a DC line, no audio; a NaN/Inf "
                    "turned into PCM by the server reads as a constant -1.0 or 0)",
                    listen,
                )
            )
        elif stats["clipping_ratio"] >= SATURATED_ERROR:
            errors.append(
                Finding(f"{name}: SATURATED: {stats['clipping_ratio']:.0%} of the samples at full scale", listen)
            )
        elif spc is not None and (spc > hi * DURATION_ERROR_FACTOR or spc < lo / DURATION_ERROR_FACTOR):
            errors.append(
                Finding(
                    f"{name}: DURATION: {spc:.3f} s per character ({stats['duration_s']:.2f} s for "
                    f"{_chars(audio)} characters), {DURATION_ERROR_FACTOR}x outside the band {lo:g}..{hi:g}",
                    listen,
                )
            )
        if stats["silence_ratio"] > limits["silence_ratio"] and stats["silence_ratio"] < SILENT_ERROR:
            warnings.append(
                Finding(f"{name}: {stats['silence_ratio']:.0%} silence (limit {limits['silence_ratio']:.0%})", listen)
            )
        if limits["clipping_ratio"] < stats["clipping_ratio"] < SATURATED_ERROR:
            warnings.append(
                Finding(
                    f"{name}: {stats['clipping_ratio']:.1%} of the samples clipped (limit "
                    f"{limits['clipping_ratio']:.1%})",
                    listen,
                )
            )
        if abs(stats["dc_offset"]) > limits["dc_offset"] and stats["std"] >= CONSTANT_STD:
            warnings.append(
                Finding(f"{name}: DC offset {stats['dc_offset']:+.3f} (limit +-{limits['dc_offset']:g})", listen)
            )
        if spc is not None and not lo <= spc <= hi and lo / DURATION_ERROR_FACTOR <= spc <= hi * DURATION_ERROR_FACTOR:
            warnings.append(
                Finding(f"{name}: {spc:.3f} s per character, outside the calibrated band {lo:g}..{hi:g}", listen)
            )
    metrics = {"requests": rows, "limits": {**limits, "seconds_per_char": list(limits["seconds_per_char"])}}
    metrics["calibration"] = gate_limits.CALIBRATION.get("command")
    if errors:
        return failed(
            check, "audio gates: the audio is not speech-like:", errors, metrics=metrics, warnings=tuple(warnings)
        )
    summary = f"{len(rows)} requests within the gates"
    if warnings:
        summary += f" ({len(warnings)} warnings)"
    return passed(check, summary, metrics=metrics, warnings=tuple(warnings))
