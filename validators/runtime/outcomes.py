"""Each check's outcome from pytest's own reports, and each model's results from its checks' outcomes.

Fail closed: a check counts as passed only when pytest reported its setup, its call and its teardown as passed. A
check whose process died (an xdist worker that crashed, ``os._exit``, the last-resort stop of a hang), whose run was
interrupted, or that was collected and never reported is ``not-run``, and a ``not-run`` check ticks nothing. A
failing report the run cannot attribute to a check (a worker lost before the check's setup was reported, an internal
error, a collection error) leaves its model, or every model, unproven: nothing of it is ticked.

The input is a stream of small JSON-able events (what the plugin's hooks saw); the same events go to a journal on disk,
so that the results can be rebuilt by another process when the pytest process itself dies
(:mod:`omnitts.validators.runtime.results`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

PASSED, FAILED, SKIPPED, NOT_RUN = "passed", "failed", "skipped", "not-run"
# which outcome wins when several nodes report one check id (or a check and a tick): anything but passed beats passed
RANK = {FAILED: 4, NOT_RUN: 3, PASSED: 2, SKIPPED: 1, None: 0}
PHASES = ("setup", "call", "teardown")


@dataclass
class CheckNode:
    """What pytest reported about one collected check (one test node)."""

    nodeid: str
    check: str | None = None
    model: str | None = None
    phases: dict[str, str] = field(default_factory=dict)  # when -> outcome; xdist's crash report is when "???"
    message: str = ""
    skip_reason: str = ""
    metrics: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    placement: dict | None = None
    started: bool = False

    @property
    def outcome(self) -> str:
        if FAILED in self.phases.values():
            return FAILED
        if SKIPPED in (self.phases.get("setup"), self.phases.get("call")):
            return SKIPPED
        if all(self.phases.get(p) == PASSED for p in PHASES):
            return PASSED
        return NOT_RUN

    @property
    def why(self) -> str:
        """What the results say about a check that did not pass."""
        outcome = self.outcome
        if outcome == FAILED:
            return self.message
        if outcome == SKIPPED:
            return self.skip_reason
        if outcome == NOT_RUN:
            if self.started or self.phases:
                done = ", ".join(f"{p} {o}" for p, o in self.phases.items()) or "nothing"
                return (
                    f"no outcome: this check started but never finished (reported: {done}); its process ended or the "
                    "run was interrupted"
                )
            return (
                "no outcome: this check was collected but never ran (the run stopped first: -x/--maxfail, an "
                "interrupt, a crashed worker's queue, an internal error)"
            )
        return ""


def model_of(nodeid: str, models: list[str]) -> str | None:
    """The model a check node was parametrised with, read from its node id (``test_x[MODEL]``, ``[MODEL]@group``)."""
    found = [m for m in models if any(f"{a}{m}{b}" in nodeid for a in "[-" for b in "]-")]
    return max(found, key=len) if found else None


class Outcomes:
    """The run's check nodes, built event by event (:meth:`apply`); :meth:`per_model` is the verdict per model."""

    def __init__(self, models: list[str]):
        self.models = list(models)
        self.nodes: dict[str, CheckNode] = {}
        self.errors: list[str] = []  # run-wide: internal errors, collection errors, an interrupted session

    def _node(self, nodeid: str, tag: dict | None = None) -> CheckNode | None:
        node = self.nodes.get(nodeid)
        if node is None:
            model = (tag or {}).get("model") or model_of(nodeid, self.models)
            if model is None:
                return None  # not a check of this run (another suite's test in the same session)
            node = self.nodes[nodeid] = CheckNode(nodeid, model=model)
        if tag:
            node.check, node.model = tag.get("check") or node.check, tag.get("model") or node.model
        return node

    def apply(self, event: dict) -> None:
        kind = event["kind"]
        if kind == "expected":
            self._node(event["nodeid"], event.get("tag"))
        elif kind == "start":
            node = self._node(event["nodeid"])
            if node is not None:
                node.started = True
        elif kind == "report":
            self._report(event)
        elif kind == "error":
            self.errors.append(event["message"])

    def _report(self, event: dict) -> None:
        node = self._node(event["nodeid"], event.get("tag"))
        if node is None:
            return
        when, outcome = event["when"], event["outcome"]
        # a phase reported twice (a rerun) keeps its worst outcome
        if RANK.get(outcome, 0) >= RANK.get(node.phases.get(when), 0):
            node.phases[when] = outcome
        node.metrics.update(event.get("metrics") or {})
        node.extra.update(event.get("extra") or {})
        if event.get("placement"):
            node.placement = event["placement"]
        if outcome == FAILED and not node.message:
            node.message = (event.get("message") or f"{when} failed")[:8000]
        elif outcome == SKIPPED and not node.skip_reason:
            node.skip_reason = (event.get("message") or "")[:500]

    def running(self) -> CheckNode | None:
        """The check that started last and has no teardown report (where a dead process was)."""
        started = [n for n in self.nodes.values() if n.started and "teardown" not in n.phases]
        return started[-1] if started else None

    def per_model(self) -> dict[str, dict]:
        """Per model: ``results`` (check id -> outcome, ticks included), ``metrics``, ``messages`` (why each check
        that did not pass did not), ``pattern``, ``placement`` and ``unproven`` (why nothing of the model may be
        ticked; empty when every check node has an attributed outcome)."""
        per_model: dict[str, dict] = {
            m: {"results": {}, "metrics": {}, "messages": {}, "pattern": None, "unproven": list(self.errors)}
            for m in {n.model for n in self.nodes.values()}
        }
        for node in self.nodes.values():
            m = per_model[node.model]
            outcome = node.outcome
            if node.check is None:  # lost before its check id was reported: the model is not proven
                if outcome != PASSED:
                    m["unproven"].append(f"{node.nodeid}: {outcome}: {_first_line(node.why)}")
                continue
            if RANK[outcome] > RANK[m["results"].get(node.check)]:
                m["results"][node.check] = outcome
                if outcome != PASSED and node.why:
                    m["messages"][node.check] = node.why
            if outcome != NOT_RUN:  # ticks a check reported next to its own outcome count only if it finished
                for tick, value in node.extra.items():
                    if RANK.get(value, 0) > RANK[m["results"].get(tick)]:
                        m["results"][tick] = value
            if node.metrics:
                m["metrics"][node.check] = node.metrics
                m["pattern"] = m["pattern"] or node.metrics.get("pattern")
            if node.placement:
                m.setdefault("placement", set()).add((node.placement["worker"], node.placement["device"]))
        return per_model


def _first_line(text: str) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")
