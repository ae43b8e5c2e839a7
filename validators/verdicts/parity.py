"""Reference parity: does the integration compute what the model it ports computes (``--reference CAPTURE``).

Four verdicts over one :class:`ParityObservation` (a capture's requests through the integration), each with the
dtype's tolerance from the one tolerance table (``tolerances.PARITY``) and the comparison helpers of
``validators/parity/compare.py``:

* ``parity.codes``: the codes reaching the integration's decoder against the reference's, frame by frame: frames
  agreeing, the first divergent frame and codebook; in bf16 the top-k criterion (free running, as vLLM's
  ``check_logprobs_close``); latent models: latents within the waveform tolerance;
* ``parity.decoder_alone``: the reference's codes through the integration's decoder: drift in the generator vs drift
  in the codec or dtype;
* ``parity.end_to_end``: each request alone: length, max |diff|, SNR, and where a divergence starts (generator,
  decoder, hand-over);
* ``parity.batched``: each request among all the others against the reference.

A release's by-design differences from the reference (``knowledge/references.known_differences``) are named in the
finding they explain; they still fail: a difference is reported, never tolerated silently.
"""

from __future__ import annotations

import numpy as np

from omnitts.knowledge.references import KnownDifference, known_differences
from omnitts.validators import checkids
from omnitts.validators.observations.parity import ParityObservation, ParityRequest
from omnitts.validators.parity.compare import (
    CodesComparison,
    WaveComparison,
    compare_codes,
    compare_waveforms,
    free_running_topk,
    locate,
)
from omnitts.validators.verdicts.base import Finding, Verdict, Wav, failed, not_applicable, outcome, verdict
from omnitts.validators.verdicts.tolerances import ParityTolerance, parity_tolerance


def _unjudgeable(check: str, obs: ParityObservation) -> Verdict | None:
    """Fail closed before comparing: a run that died, another checkpoint than the capture's, an unknown dtype."""
    if obs.error:
        return failed(check, f"{check}: the parity run against {obs.capture} failed: {obs.error}", ())
    if obs.checkpoint_differs:
        files = ", ".join(obs.checkpoint_differs)
        return failed(
            check,
            f"{check}: the capture {obs.capture} was made on another checkpoint ({files} differ): capture again with "
            "this --checkpoint",
            (),
        )
    try:
        parity_tolerance(obs.dtype)
    except KeyError as exc:
        return failed(check, f"{check}: {exc.args[0]}", ())
    if not obs.requests:
        return failed(check, f"{check}: the capture {obs.capture} has no requests", ())
    return None


def _known(obs: ParityObservation) -> tuple[KnownDifference, ...]:
    return known_differences(obs.release, obs.model) if obs.release else ()


def _about(obs: ParityObservation, tol: ParityTolerance) -> str:
    known = ", ".join(k.id for k in _known(obs))
    notes = [f"{obs.reference}, {obs.dtype} ({tol})"]
    if known:
        notes.append(f"known differences of {obs.model} {obs.release}: {known}")
    if obs.followed:
        notes.append("the run followed the dtype: " + "; ".join(obs.followed))
    return "; ".join(notes)


def _listen(folder: str, req: ParityRequest, got: np.ndarray | None, rate: int | None, what: str) -> tuple[Wav, ...]:
    wavs = [Wav(folder, f"{req.request}_reference", np.asarray(req.ref_waveform, dtype=np.float32), rate)]
    if got is not None:
        wavs.append(Wav(folder, f"{req.request}_{what}", np.asarray(got, dtype=np.float32), rate))
    return tuple(wavs)


def _codes(req: ParityRequest, known) -> CodesComparison | None:
    if req.ref_codes is None or req.codes is None:
        return None
    return compare_codes(req.ref_codes, req.codes, known)


@verdict(checkids.PARITY_CODES)
def codes(obs: ParityObservation) -> Verdict:
    check = checkids.PARITY_CODES
    early = _unjudgeable(check, obs)
    if early:
        return early
    tol, known = parity_tolerance(obs.dtype), _known(obs)
    findings, metrics = [], {}
    for req in obs.requests:
        if req.ref_latents is not None:  # a latent model: latents within the waveform tolerance
            if req.latents is None:
                findings.append(f"{req.request}: the integration's latents were not observed")
                continue
            ref, got = np.asarray(req.ref_latents), np.asarray(req.latents)
            if ref.shape != got.shape:
                findings.append(f"{req.request}: latents {got.shape} where the reference has {ref.shape}")
                continue
            cmp = compare_waveforms(ref, got, atol=tol.wave_atol)
            metrics[req.request] = {"latents_max_abs_diff": cmp.max_abs_diff}
            if not cmp.within:
                frame = int(np.flatnonzero(np.any(np.abs(ref - got) > tol.wave_atol, axis=1))[0])
                findings.append(f"{req.request}: latents differ from frame {frame} on, {cmp.describe()}")
            continue
        if req.ref_codes is None:
            findings.append(f"{req.request}: the capture has neither codes nor latents for it")
            continue
        if req.codes is None:
            findings.append(f"{req.request}: the codes reaching the integration's decoder were not observed")
            continue
        found = compare_codes(req.ref_codes, req.codes, known)
        metrics[req.request] = {
            "frames": found.frames_ref,
            "agreeing_frames": found.agreeing_prefix,
            "first_divergence": list(found.first_divergence) if found.first_divergence else None,
            "known_difference": found.known.id if found.known else None,
        }
        if found.equal:
            continue
        if tol.exact_codes or found.codebooks_ref != found.codebooks_got:
            findings.append(f"{req.request}: {found.describe()}")
            continue
        if req.ref_topk is None:
            findings.append(
                f"{req.request}: {found.describe()}; in {obs.dtype} codes are judged by the reference's "
                f"top-{tol.topk}, which the capture lacks (give the adapter scores(), or capture and run in float32)"
            )
            continue
        topk = free_running_topk(req.ref_codes, np.asarray(req.ref_topk)[..., : tol.topk], req.codes)
        metrics[req.request]["topk"] = topk.describe()
        if not topk.within:
            findings.append(f"{req.request}: {topk.describe()} ({found.describe()})")
    frames = sum(m.get("frames", 0) for m in metrics.values())
    summary = f"codes equal the reference's: {len(obs.requests)} requests, {frames} frames; {_about(obs, tol)}"
    diverge = f"{len(findings)} of {len(obs.requests)} requests diverge from the reference"
    headline = f"{check}: {diverge}; {_about(obs, tol)}"
    return outcome(check, headline, findings, summary, metrics=metrics, shown=len(findings))


def _waves(
    check: str, obs: ParityObservation, what: str, pick, ref_of=lambda r: r.ref_waveform, place=False
) -> Verdict:
    """One waveform of each request (``pick``) against the reference's (``ref_of``), with the dtype's tolerance."""
    early = _unjudgeable(check, obs)
    if early:
        return early
    tol, known = parity_tolerance(obs.dtype), _known(obs)
    findings, metrics = [], {}
    folder = check.replace(".", "_")
    for req in obs.requests:
        ref, got = ref_of(req), pick(req)
        if ref is None:
            findings.append(f"{req.request}: the capture has no {what} reference for it")
            continue
        if got is None:
            findings.append(f"{req.request}: the integration's {what} was not observed")
            continue
        cmp: WaveComparison = compare_waveforms(ref, got, atol=tol.wave_atol)
        metrics[req.request] = {
            "samples": cmp.samples_got,
            "reference_samples": cmp.samples_ref,
            "max_abs_diff": cmp.max_abs_diff,
            "snr_db": cmp.snr_db,
        }
        if cmp.within:
            continue
        text = f"{req.request}: {what} {cmp.describe()}"
        if place:  # where it starts: the codes, the decoder alone, or what lies between
            decoder = None
            if req.ref_decoded is not None and req.decoded is not None:
                decoder = compare_waveforms(req.ref_decoded, req.decoded, atol=tol.wave_atol)
            codes_cmp = _codes(req, known)
            where = locate(codes_cmp, decoder, cmp)
            metrics[req.request]["where"] = where
            text += f"; diverges in the {where}"
            if codes_cmp is not None and not codes_cmp.equal:
                text += f" ({codes_cmp.describe()})"
        findings.append(Finding(text, _listen(folder, req, got, obs.sample_rate, what.replace(" ", "_"))))
    worst = max((m["max_abs_diff"] for m in metrics.values()), default=0.0)
    summary = f"{what} equals the reference's for {len(metrics)} requests (max |diff| {worst:.3g}); {_about(obs, tol)}"
    headline = f"{check}: {len(findings)} of {len(obs.requests)} requests differ from the reference; {_about(obs, tol)}"
    return outcome(check, headline, findings, summary, metrics=metrics)


@verdict(checkids.PARITY_DECODER_ALONE)
def decoder_alone(obs: ParityObservation) -> Verdict:
    if not obs.decoder_alone:
        why = f"{obs.source.backend} does not run the integration's decoder alone (--engine offline does)"
        return not_applicable(checkids.PARITY_DECODER_ALONE, why)
    return _waves(
        checkids.PARITY_DECODER_ALONE, obs, "decoder alone", lambda r: r.decoded, ref_of=lambda r: r.ref_decoded
    )


@verdict(checkids.PARITY_END_TO_END)
def end_to_end(obs: ParityObservation) -> Verdict:
    return _waves(checkids.PARITY_END_TO_END, obs, "waveform", lambda r: r.waveform, place=True)


@verdict(checkids.PARITY_BATCHED)
def batched(obs: ParityObservation) -> Verdict:
    return _waves(checkids.PARITY_BATCHED, obs, "batched waveform", lambda r: r.batched)
