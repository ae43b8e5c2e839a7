"""The server's own contract over HTTP: every offered response format, and clear refusals of bad requests."""

from __future__ import annotations

from omnitts.validators import checkids
from omnitts.validators.observations.server import BadRequestsObservation, FormatsObservation
from omnitts.validators.verdicts.base import Finding, Verdict, Wav, failed, outcome, verdict
from omnitts.validators.verdicts.compare import compare, nondeterminism
from omnitts.validators.verdicts.tolerances import tolerance

LOSSY = {"mp3": 0.1, "opus": 0.1}  # seconds of encoder delay / frame padding a lossy codec may add
OPUS_RATES = {8000, 12000, 16000, 24000, 48000}
MP3_RATES = {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}


@verdict(checkids.SERVER_RESPONSE_FORMATS)
def response_formats(obs: FormatsObservation) -> Verdict:
    """Every offered format decodes to the pcm answer's audio: lossless formats at the expected sample rate with the
    same samples (a lossless codec keeps the length: within half a sample), lossy ones at a rate of their codec and
    within their padding."""
    check, sr = checkids.SERVER_RESPONSE_FORMATS, obs.sample_rate
    metrics = {"offered": list(obs.offered), "sample_rate": sr}
    if obs.problem:
        return failed(check, f"server formats: {obs.problem}", (), metrics=metrics)
    findings, tol = [], tolerance(obs.source, "audio")
    unsure = nondeterminism(obs.repeat, tol.rtol, tol.atol)
    if obs.wav_sr is not None and obs.wav_sr != sr:
        findings.append(f"wav: {obs.wav_sr} Hz, expected {sr} Hz")
    pcm = obs.pcm
    want = pcm.size / sr
    metrics.update(pcm_seconds=round(want, 4), formats={})
    if pcm.size == 0:
        findings.append("pcm: no audio")
    for row in obs.results:
        fmt = row.fmt
        if row.problem:
            findings.append(f"{fmt}: {row.problem}")
            continue
        if row.decode_error:
            findings.append(f"{fmt}: not decodable here: {row.decode_error}{row.hint}")
            continue
        got, got_sr = row.audio, row.audio.sample_rate
        seconds = got.size / got_sr if got_sr else 0.0
        metrics["formats"][fmt] = {"sample_rate": got_sr, "seconds": round(seconds, 4)}
        if got.size == 0:
            findings.append(f"{fmt}: no audio")
            continue
        if fmt not in LOSSY and got_sr != sr:
            findings.append(f"{fmt}: {got_sr} Hz, wav has {sr} Hz")
        if fmt == "opus" and got_sr not in OPUS_RATES or fmt == "mp3" and got_sr not in MP3_RATES:
            findings.append(f"{fmt}: decodes at {got_sr} Hz, not a rate of that codec")
        if fmt == "mp3" and sr in MP3_RATES and got_sr != sr:
            findings.append(f"mp3: {got_sr} Hz, wav has {sr} Hz")
        if unsure:
            continue  # another request's duration may differ legitimately
        listen = (Wav("formats", fmt, got.samples, got_sr), Wav("formats", "pcm", pcm.samples, sr))
        if abs(seconds - want) > LOSSY.get(fmt, 0.5 / sr):
            findings.append(Finding(f"{fmt}: {seconds:.4f} s, pcm has {want:.4f} s", listen))
        elif fmt not in LOSSY and got_sr == sr:
            cmp = compare(got.samples, pcm.samples, tol.rtol, tol.atol, what=fmt, ref="pcm")
            if not cmp:
                findings.append(Finding(f"{fmt}: samples differ from pcm: {cmp.verdict}", listen))
    note = " (durations not compared: server not deterministic)" if unsure else ""
    return outcome(
        check,
        "server formats:",
        findings,
        f"{', '.join(obs.offered)} decode at {sr} Hz with {want:.3f} s{note}",
        metrics=metrics,
    )


@verdict(checkids.SERVER_BAD_REQUESTS)
def bad_requests(obs: BadRequestsObservation) -> Verdict:
    """Each bad request gets a 4xx with a message, in bounded time, and the server goes on serving."""
    findings = []
    for case in obs.cases:
        if case.problem:
            findings.append(f"{case.what}: {case.problem}")
        elif case.status is None or not 400 <= case.status < 500:
            findings.append(f"{case.what}: expected a 4xx, got {case.brief}")
        elif not case.message:
            findings.append(f"{case.what}: HTTP {case.status} without a message")
    if obs.after_status != 200:
        findings.append(f"the server stopped serving after the bad requests: {obs.after_brief}")
    return outcome(
        checkids.SERVER_BAD_REQUESTS,
        "bad requests must get a 4xx with a message:",
        findings,
        "every bad request got a 4xx with a message",
        metrics={"statuses": {c.what: c.status for c in obs.cases}, "still_serving": obs.after_status},
    )
