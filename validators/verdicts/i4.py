"""I4, concurrent requests: each request sounds the same alone and among others, and its text reaches the model."""

from __future__ import annotations

from omnitts.validators import checkids
from omnitts.validators.observations.audio import ConcurrencyObservation, RequestAudio, SeedObservation
from omnitts.validators.verdicts.audio import unjudged
from omnitts.validators.verdicts.base import Finding, Verdict, Wav, failed, not_applicable, outcome, passed, verdict
from omnitts.validators.verdicts.compare import compare, crosstalk, nondeterminism, same_audio
from omnitts.validators.verdicts.signal import at, attribute, describe_heard, window_for
from omnitts.validators.verdicts.tolerances import tolerance

MIN_REQUESTS = 4  # concurrent requests the check needs


@verdict(checkids.I4_CONCURRENCY)
def concurrency(obs: ConcurrencyObservation) -> Verdict:
    check = checkids.I4_CONCURRENCY
    if obs.prompts is not None and obs.prompts < MIN_REQUESTS:
        why = f"I4: {obs.subject} has {obs.prompts} prompts; the concurrency check needs at least {MIN_REQUESTS}"
        return failed(check, why, ())
    nan = unjudged(check, [*obs.solo, *(r for rnd in obs.rounds for r in rnd.requests)])
    if nan:
        return nan
    tol = tolerance(obs.source, "audio")
    solo = {r.request: r for r in obs.solo}
    findings = [
        f"{same}: the text does not reach the model" for same in same_audio({k: r.samples for k, r in solo.items()})
    ]
    summary, compared, attributions = {}, 0, []
    for rnd in obs.rounds:
        findings += [f"[{rnd.name}] {error}" for error in rnd.errors]
        exact = checked = 0
        for i, got in enumerate(rnd.requests):
            own = solo.get(got.request)
            if own is None:
                continue
            checked += 1
            pieces = got.pieces()
            cmp = compare(
                got.samples, own.samples, tol.rtol, tol.atol, pieces, f"{got.request} in {rnd.name}", "its solo run"
            )
            exact += int(cmp.exact)
            if not cmp:
                others = {k: r.samples for k, r in solo.items()}
                who = crosstalk(got.samples, own.samples, others, got.request, pieces, tol.rtol, tol.atol)
                name = got.request if sum(r.request == got.request for r in rnd.requests) == 1 else f"{got.request}-{i}"
                folder = f"i4_{rnd.name}"
                listen = (
                    Wav(folder, name, got.samples, got.sample_rate),
                    Wav(folder, f"{name}_solo", own.samples, own.sample_rate),
                )
                heard = heard_lines(got, own, obs.solo, cmp.first_diff)
                text = f"[{rnd.name}] {cmp.verdict}\n      crosstalk: {who}" + "".join(
                    f"\n      heard: {line}" for line in heard
                )
                findings.append(Finding(text, listen))
                row = {"round": rnd.name, "request": got.request, "text": got.text, "heard": heard}
                attributions.append({**row, "wav": f"{folder}/{name}"})
        compared += checked
        summary[rnd.name] = {"requests": checked, "bit_exact": exact}
        if rnd.widest is not None:
            summary[rnd.name]["widest_stage0_batch"] = rnd.widest
        if rnd.required is not None and (rnd.widest or 0) < rnd.required:
            findings.append(
                f"[{rnd.name}] only {rnd.widest} requests ever shared a stage-0 batch; "
                f"need >= {rnd.required} concurrent"
            )
    if compared < MIN_REQUESTS:
        findings.append(f"{compared} requests compared with their solo runs; the check needs at least {MIN_REQUESTS}")
    unsure = nondeterminism(obs.repeat, tol.rtol, tol.atol)
    if findings and unsure:
        findings.insert(0, unsure)
    return outcome(
        check,
        f"I4: concurrent audio differs from solo audio ({tol}):",
        findings,
        f"{compared} concurrent requests in {len(obs.rounds)} rounds equal their solo runs; texts distinct",
        metrics={
            **(obs.about or {}),
            "compositions": summary,
            "rtol": tol.rtol,
            "atol": tol.atol,
            "attributions": attributions,
        },
        shown=8,
    )


def heard_lines(
    got: RequestAudio, own: RequestAudio, solo, first_diff: int | None, nobody: str = "corrupted, or another voice"
) -> list[str]:
    """Whose audio ``got`` holds from (the window of) its first differing sample on: its own solo run, a peer's, or
    nobody's, found by cross-correlation against every solo run (so a leak is named under bf16 and 16-bit PCM)."""
    w = window_for(got.sample_rate)
    start = (first_diff // w) * w if first_diff is not None else 0
    sources = {r.request: r.samples for r in solo}
    heard = attribute(got.samples, sources, got.sample_rate, start)
    lines = describe_heard(heard, got.sample_rate, own.request)
    if not heard:
        lines = [f"from {at(start, got.sample_rate)} on, the audio is in no request's solo run ({nobody})"]
    return lines


@verdict(checkids.I4_SEED_DETERMINISM)
def seed_determinism(obs: SeedObservation) -> Verdict:
    """A request with a seed gives the same audio alone and in every batch composition (the same seed twice in one
    batch included): a model that samples must draw from a generator of its own request, seeded by its seed."""
    check = checkids.I4_SEED_DETERMINISM
    if obs.unavailable:
        return not_applicable(check, obs.unavailable)
    nan = unjudged(check, [*obs.solo, *(r for rnd in obs.rounds for r in rnd.requests)])
    if nan:
        return nan
    tol = tolerance(obs.source, "audio")
    solo = {r.request: r for r in obs.solo}
    seeds = obs.seeds or {}
    findings, compared, rows, summary = [], 0, [], {}
    for rnd in obs.rounds:
        findings += [f"[{rnd.name}] {error}" for error in rnd.errors]
        exact = 0
        for i, got in enumerate(rnd.requests):
            own = solo.get(got.request)
            if own is None:
                continue
            compared += 1
            seed = seeds.get(got.request)
            what = f"{got.request} (seed {seed}) in {rnd.name}"
            cmp = compare(got.samples, own.samples, tol.rtol, tol.atol, got.pieces(), what, "its solo run, same seed")
            exact += int(cmp.exact)
            if cmp:
                continue
            peers = [f"{r.request} (seed {seeds.get(r.request)})" for r in rnd.requests if r is not got]
            heard = heard_lines(got, own, obs.solo, cmp.first_diff, "drawn from another random stream than alone")
            name = f"{got.request}-{i}"
            listen = (
                Wav(f"i4_seed_{rnd.name}", name, got.samples, got.sample_rate),
                Wav(f"i4_seed_{rnd.name}", f"{name}_solo", own.samples, own.sample_rate),
            )
            text = (
                f"[{rnd.name}] SEED IGNORED IN A BATCH: {got.request} (seed {seed}): {cmp.verdict}; batched with "
                f"{', '.join(peers[:4])}" + "".join(f"\n      heard: {line}" for line in heard)
            )
            findings.append(Finding(text, listen))
            row = {"round": rnd.name, "request": got.request, "text": got.text, "seed": seed, "heard": heard}
            rows.append({**row, "wav": f"i4_seed_{rnd.name}/{name}"})
        summary[rnd.name] = {"requests": len(rnd.requests), "bit_exact": exact}
    if compared == 0 and not findings:
        findings.append("no seeded request was compared with its solo run")
    sampled = None
    first = obs.solo[0] if obs.solo else None
    if obs.reseeded is not None and first is not None:
        sampled = not compare(obs.reseeded.samples, first.samples, tol.rtol, tol.atol)
    metrics = {**(obs.about or {}), "compositions": summary, "seeds": seeds, "seed_changes_audio": sampled}
    metrics["attributions"] = rows
    if findings:
        return failed(
            check,
            f"I4: a seeded request's audio changes with the batch it is in ({tol}):",
            findings,
            metrics=metrics,
            shown=8,
        )
    note = (
        "; another seed changes the audio (the model samples)"
        if sampled
        else "; the audio does not depend on the seed (the model does not sample): this holds trivially"
        if sampled is False
        else ""
    )
    return passed(
        check,
        f"{compared} seeded requests in {len(obs.rounds)} compositions equal their solo runs{note}",
        metrics=metrics,
    )
