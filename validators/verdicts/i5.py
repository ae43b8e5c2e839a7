"""I5, per-request state is owned by the request: gone after finish, abort and disconnect; no growth; no aliasing."""

from __future__ import annotations

from omnitts.validators import checkids
from omnitts.validators.observations.state import (
    AbortObservation,
    AliasObservation,
    Container,
    GrowthObservation,
    StateFreedObservation,
    WorkerState,
)
from omnitts.validators.verdicts.base import Verdict, not_applicable, outcome, verdict
from omnitts.validators.verdicts.tolerances import MEMORY

SHOWN = 10  # findings shown per moment (finish and abort both show, however many finished requests leaked)


def holders(containers: tuple[Container, ...], ids: dict[str, str]) -> list[tuple[str, str]]:
    """(id, line) for each container key that mentions a request id (``ids``: id -> what it is)."""
    found = []
    for c in containers:
        for k in c.keys:
            for rid, desc in ids.items():
                if rid == k or (len(rid) > 6 and rid in k):
                    found.append((rid, f"{c.path} still holds {k!r} ({desc})"))
    return found


def footprint(worker: WorkerState) -> dict[str, tuple[int, int]]:
    return {c.path: (c.size, c.nbytes) for c in worker.containers}


def growth(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    grew = []
    for path, (size, nbytes) in after.items():
        s0, b0 = before.get(path, (0, 0))
        if size > s0 or nbytes > b0:
            grew.append(f"{path}: {s0} -> {size} entries, {b0} -> {nbytes} tensor bytes")
    return grew


@verdict(checkids.I5_STATE_FREED)
def state_freed(obs: StateFreedObservation) -> Verdict:
    findings = list(obs.failures)
    if obs.interrupted is False:
        findings.append("the request ended before it was aborted (or never reached the model): nothing interrupted it")
    counts = {}
    for m in obs.moments:
        where = f"after {m.when} ({m.scenario})"
        counts[where] = len(m.ids)
        if not m.state.settled:
            findings.append(f"{where}: the engine did not report every request finished to the worker in time")
        if not m.ids:
            findings.append(f"{where}: no request reached the model; nothing was checked")
        lines = []
        for worker in m.state.workers:
            for rid, line in holders(worker.containers, m.ids):
                lines.append(f"after {'abort' if rid in m.aborted else m.when} ({m.scenario}): {line}")
        findings += lines[:SHOWN]
    contract = (
        f" (vLLM-Omni {obs.release} passes scheduler ids to on_requests_finished; key state by "
        f"{obs.id_key or 'the runner buffer'})"
        if obs.release
        else ""
    )
    return outcome(
        checkids.I5_STATE_FREED,
        f"I5: per-request entries survive the request{contract}:",
        findings,
        "no container keeps a request's id after it ended",
        metrics={**(obs.about or {}), "ids_looked_for": counts, "interrupted": obs.interrupted},
        shown=len(findings),
    )


@verdict(checkids.I5_NO_GROWTH)
def no_growth(obs: GrowthObservation) -> Verdict:
    n, findings = obs.requests, list(obs.failures)
    if obs.seen is not None and obs.seen < n - 1:
        findings.append(f"{obs.seen} requests reached the worker between the snapshots (of {n - 1})")
    if not obs.after.settled:
        findings.append("the engine did not report every request finished to the worker in time")
    grew = []
    for before, after in zip(obs.before.workers, obs.after.workers, strict=True):
        grew += growth(footprint(before), footprint(after))
    containers = sum(len(w.containers) for w in obs.after.workers)
    return outcome(
        checkids.I5_NO_GROWTH,
        f"I5: model state grows over {n} sequential requests (after request 1 -> after request {n}):",
        findings + grew[:SHOWN],
        f"{containers} containers hold no more after {n} requests than after 1",
        metrics={"requests": n, "seen_between": obs.seen, "containers": containers},
    )


@verdict(checkids.I5_OUTPUTS_NOT_ALIASED)
def outputs_not_aliased(obs: AliasObservation) -> Verdict:
    """A step's outputs must not change when the next step runs (no views of persistent/static buffers)."""
    unique = sorted(set(obs.violations), key=obs.violations.index)
    return outcome(
        checkids.I5_OUTPUTS_NOT_ALIASED,
        f"I5: {len(obs.violations)} outputs were overwritten after they were returned "
        "(the engine keeps them by reference):",
        unique,
        "no output changed after it was returned",
        metrics={"violations": len(obs.violations), "pattern": obs.pattern},
        shown=8,
    )


def _mib(n: int) -> str:
    return f"{n / 2**20:+.2f} MiB" if abs(n) >= 2**20 else f"{n / 1024:+.1f} KiB"


@verdict(checkids.I5_ABORT_RECOVERY)
def abort_recovery(obs: AbortObservation) -> Verdict:
    """Clients that go away mid-stream at several offsets, again and again: afterwards no container holds an aborted
    request's id, none holds more than at the baseline, the tensors the model holds and the process's memory are
    back to the baseline within ``tolerances.MEMORY``, and the next request is served."""
    check = checkids.I5_ABORT_RECOVERY
    if obs.unavailable:
        return not_applicable(check, obs.unavailable)
    findings = list(obs.failures)
    attempts = obs.attempts
    interrupted = [a for a in attempts if a.interrupted]
    offsets = list(dict.fromkeys(a.offset for a in interrupted))
    if not interrupted:
        findings.append(
            f"none of the {len(attempts)} aborts came while its request still streamed (each had finished, or never "
            "started): nothing was interrupted"
        )
    findings += [f"abort {a.offset} of {a.request}: {a.error}" for a in attempts if a.error]
    if obs.after is not None and not obs.after.settled:
        findings.append("the engine did not report every aborted request finished to the worker in time")
    leaks, left = [], []
    if obs.after is not None:
        for w, worker in enumerate(obs.after.workers):
            for _, line in holders(worker.containers, obs.ids or {}):
                left.append({"worker": w, "entry": line})
                held = line.split(" (", 1)[0]  # one line per entry, whichever of its ids matched
                if not any(x.startswith(f"after {len(attempts)} aborts: {held}") for x in leaks):
                    leaks.append(f"after {len(attempts)} aborts: {line}")
    findings += leaks[:SHOWN]
    grew = []
    if obs.before is not None and obs.after is not None:
        for before, after in zip(obs.before.workers, obs.after.workers, strict=False):
            grew += growth(footprint(before), footprint(after))
    findings += [f"held more than at the baseline: {g}" for g in grew[:SHOWN]]
    memory = []
    for w, (m0, m1) in enumerate(zip(obs.memory_before, obs.memory_after, strict=False)):
        row = {"worker": w, "held_growth": m1.held - m0.held, "rss_growth": m1.rss - m0.rss}
        if m1.held - m0.held > MEMORY.held:
            findings.append(
                f"worker {w}: the model holds {_mib(m1.held - m0.held)} of tensors more than before the aborts "
                f"({m0.held} -> {m1.held} bytes; tolerance {_mib(MEMORY.held)}): an aborted request's state"
            )
        if m1.rss - m0.rss > MEMORY.rss:
            findings.append(
                f"worker {w}: resident memory {_mib(m1.rss - m0.rss)} over the baseline (tolerance {_mib(MEMORY.rss)})"
            )
        if m0.cuda is not None and m1.cuda is not None:
            row["cuda_growth"] = m1.cuda - m0.cuda
            if m1.cuda - m0.cuda > MEMORY.cuda:
                findings.append(
                    f"worker {w}: CUDA memory allocated {_mib(m1.cuda - m0.cuda)} over the baseline (tolerance "
                    f"{_mib(MEMORY.cuda)})"
                )
        memory.append(row)
    if obs.served_after is not None:
        findings.append(f"the request after the aborts was not served: {obs.served_after}")
    metrics = {
        "aborts": len(attempts),
        "interrupted": len(interrupted),
        "offsets": offsets,
        "received": [a.received for a in attempts],
        "worker_memory": memory,
        "left": left[: SHOWN * 4],  # what still holds an aborted request, for the probe report's table
        "grew": grew[:SHOWN],
        "tolerance": {"held": MEMORY.held, "rss": MEMORY.rss, "cuda": MEMORY.cuda},
    }
    worst = max((m["held_growth"] for m in memory), default=0)
    rss = max((m["rss_growth"] for m in memory), default=0)
    return outcome(
        check,
        f"I5: state or memory survives {len(attempts)} aborted requests ({len(interrupted)} mid-stream, offsets "
        f"{', '.join(offsets) or 'none'}):",
        findings,
        f"{len(attempts)} aborts ({len(interrupted)} mid-stream: {', '.join(offsets)}): no entry left, held tensors "
        f"{_mib(worst)}, resident memory {_mib(rss)} against the baseline",
        metrics=metrics,
        shown=len(findings),
    )
