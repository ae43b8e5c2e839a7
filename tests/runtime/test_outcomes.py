"""Check outcomes from pytest's reports, the checklist ticked from them, run folders and the merged checklist.

Fail closed: only a check whose setup, call and teardown passed ticks anything; crashes, interrupted runs and failures
that belong to no check leave items unticked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from omnitts.validators.runtime import checklist, results
from omnitts.validators.runtime.outcomes import Outcomes, model_of

MODEL = "ref_two_stage"
NODE = f"validators/checks/test_checks.py::test_check[i1.stream_equals_offline-{MODEL}]@{MODEL}"
TAG = {"check": "i1.stream_equals_offline", "model": MODEL}


def report(when: str, outcome: str, nodeid: str = NODE, tag: dict | None = TAG, **kw) -> dict:
    return {"kind": "report", "nodeid": nodeid, "when": when, "outcome": outcome, "tag": tag, **kw}


def passing(nodeid: str = NODE, tag: dict = TAG) -> list[dict]:
    return [report(w, "passed", nodeid, tag) for w in ("setup", "call", "teardown")]


def verdicts(events: list[dict], models=(MODEL,)) -> dict:
    outcomes = Outcomes(list(models))
    for e in events:
        outcomes.apply(e)
    return outcomes.per_model()


def item(rows: list[dict], item_id: str) -> dict:
    return next(r for r in rows if r["id"] == item_id)


def test_a_check_passes_only_when_setup_call_and_teardown_passed():
    assert verdicts(passing())[MODEL]["results"] == {"i1.stream_equals_offline": "passed"}


def test_a_check_whose_process_died_after_setup_is_not_passed():
    """The old collector kept the setup report's "passed" when xdist's crash report carried no check tag."""
    crash = report("???", "failed", tag=None, message="worker 'gw0' crashed while running ...")
    v = verdicts([{"kind": "start", "nodeid": NODE}, report("setup", "passed"), crash])[MODEL]
    assert v["results"] == {"i1.stream_equals_offline": "failed"} and "crashed" in v["messages"][TAG["check"]]
    rows = checklist.tick(v["results"], "two-stage", v["unproven"])
    assert item(rows, "I1")["mark"] == "[!]" and item(rows, "I4")["mark"] == "[!]"


def test_a_check_without_an_outcome_is_not_run_and_ticks_nothing():
    v = verdicts([{"kind": "start", "nodeid": NODE}, report("setup", "passed")])[MODEL]
    assert v["results"] == {"i1.stream_equals_offline": "not-run"}
    assert "never finished" in v["messages"][TAG["check"]]
    rows = checklist.tick(v["results"], "two-stage", v["unproven"])
    assert item(rows, "I1")["mark"] == "[?]" and item(rows, "I1")["unproven_checks"] == [TAG["check"]]
    assert "[x] I1" not in checklist.render_markdown(MODEL, rows)
    # a check that was collected and never started at all
    v = verdicts([{"kind": "expected", "nodeid": NODE, "tag": TAG}])[MODEL]
    assert v["results"] == {"i1.stream_equals_offline": "not-run"} and "never ran" in v["messages"][TAG["check"]]


def test_a_not_run_check_beats_a_passing_one_of_the_same_id_and_its_ticks_are_dropped():
    other = NODE.replace("stream_equals_offline", "stream_equals_offline_again")
    ticking = [report("setup", "passed", other), report("call", "passed", other, extra={"artifacts.wav": "passed"})]
    v = verdicts(passing() + ticking)[MODEL]
    assert v["results"] == {"i1.stream_equals_offline": "not-run"}  # the tick of an unfinished check is not counted


def test_a_failure_no_check_can_claim_leaves_the_model_unproven():
    """A worker lost before its check's setup was reported: the node id names the model, not the check."""
    lost = NODE.replace("i1.stream_equals_offline", "i4.concurrency")
    v = verdicts(passing() + [report("???", "failed", lost, tag=None, message="worker 'gw1' crashed")])[MODEL]
    assert v["results"] == {"i1.stream_equals_offline": "passed"} and len(v["unproven"]) == 1
    rows = checklist.tick(v["results"], "two-stage", v["unproven"])
    assert item(rows, "I1")["mark"] == "[?]" and not any(r["mark"] == "[x]" for r in rows)


def test_run_errors_leave_every_model_unproven():
    v = verdicts(passing() + [{"kind": "error", "message": "the run was interrupted"}])[MODEL]
    assert v["unproven"] == ["the run was interrupted"]
    assert not any(r["mark"] == "[x]" for r in checklist.tick(v["results"], "two-stage", v["unproven"]))


def test_skips_and_failures_keep_their_meaning():
    skipped = [report("setup", "passed"), report("call", "skipped", message="no CUDA"), report("teardown", "passed")]
    assert verdicts(skipped)[MODEL]["results"] == {"i1.stream_equals_offline": "skipped"}
    failed = [report("setup", "passed"), report("call", "failed", message="AssertionError: differ")]
    v = verdicts(failed + [report("teardown", "passed")])[MODEL]
    assert v["results"] == {"i1.stream_equals_offline": "failed"} and v["messages"][TAG["check"]].startswith("Assert")
    errored = passing()[:2] + [report("teardown", "failed", message="fixture exploded")]
    assert verdicts(errored)[MODEL]["results"] == {"i1.stream_equals_offline": "failed"}


def test_the_model_is_read_from_the_node_id():
    models = ["ref_two_stage", "ref_two_stage@replay", "toys.py:two_stage"]
    assert model_of("x.py::test_a[ref_two_stage@replay]@ref_two_stage+replay", models) == "ref_two_stage@replay"
    assert model_of("x.py::test_a[ref_two_stage]", models) == "ref_two_stage"
    assert model_of("x.py::test_a[other]", models) is None
    assert verdicts([report("call", "failed", "tests/test_other.py::test_b", tag=None)]) == {}  # not a check


def test_results_journal_and_recovery_after_the_process_died(tmp_path):
    """What the watcher does: rebuild the outcomes from the journal, fail the running check with the stacks."""
    run = results.reserve_run_dir(tmp_path, "harness")
    journal = results.Journal(run / results.JOURNAL)
    journal.write({"kind": "session", "models": [MODEL], "tier": "harness", "device": "cpu", "out": str(tmp_path)})
    for event in [{"kind": "start", "nodeid": NODE}, report("setup", "passed")]:
        journal.write(event)
    (run / results.STACKS).mkdir()
    (run / results.STACKS / "main.txt").write_text(
        'Timeout (0:00:26)!\nThread 0x01 (most recent call first):\n  File "m.py", line 3 in forward\n'
        '  File "/x/_pytest/python.py", line 1 in runtest\n  File "/x/_pytest/runner.py", line 2 in call\n'
    )
    written, nodeid = results.recover(run)
    assert nodeid == NODE and not (run / results.JOURNAL).exists()
    doc = json.loads((run / results.RESULTS).read_text())
    msg = doc["models"][MODEL]["failures"]["i1.stream_equals_offline"]
    assert doc["models"][MODEL]["results"] == {"i1.stream_equals_offline": "failed"}
    assert "died while this check ran" in msg and "line 3 in forward" in msg and "Timeout" in msg
    assert "runner.py" not in msg  # pytest's frames are cut
    assert (tmp_path / "checklist.md").is_file() and run / "checklist.md" in written


def test_the_watcher_writes_the_results_when_its_parent_dies(tmp_path):
    run = results.reserve_run_dir(tmp_path, "harness")
    code = (
        "import os, sys\n"
        "from omnitts.validators.runtime import results\n"
        f"run = results.Path({str(run)!r})\n"
        "j = results.Journal(run / results.JOURNAL)\n"
        f"j.write({{'kind': 'session', 'models': [{MODEL!r}], 'tier': 'harness', 'out': {str(tmp_path)!r}}})\n"
        f"j.write({{'kind': 'expected', 'nodeid': {NODE!r}, 'tag': {TAG!r}}})\n"
        f"j.write({{'kind': 'start', 'nodeid': {NODE!r}}})\n"
        "results.start_watcher(run)\n"
        "os._exit(1)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    deadline = time.monotonic() + 30
    while not (run / results.RESULTS).is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    doc = json.loads((run / results.RESULTS).read_text())
    assert doc["models"][MODEL]["results"] == {"i1.stream_equals_offline": "failed"}
    assert doc["complete"] is True  # the one check has an outcome: failed


def test_the_watcher_stays_quiet_after_a_normal_end(tmp_path):
    run = results.reserve_run_dir(tmp_path, "harness")
    journal = results.Journal(run / results.JOURNAL)
    journal.write({"kind": "session", "models": [MODEL], "tier": "harness", "out": str(tmp_path)})
    watcher = results.start_watcher(run)
    journal.close(remove=True)
    results.stop_watcher(watcher)
    assert watcher.returncode == 0 and not (run / results.RESULTS).exists()


def test_run_folders_are_one_per_run(tmp_path):
    now = time.time()
    a, b = results.reserve_run_dir(tmp_path, "harness", now), results.reserve_run_dir(tmp_path, "harness", now)
    assert a != b and a.name.startswith("harness-") and b.name == a.name + "-2"
    assert results.latest_run(tmp_path) is None  # no results yet


def _write_run(out, tier, stamp, results_, model=MODEL, pattern="two-stage"):
    run = out / f"{tier}-{stamp}"
    run.mkdir(parents=True)
    doc = {
        "tier": tier,
        "generated": stamp,
        "models": {model: {"pattern": pattern, "results": results_, "unproven": []}},
    }
    (run / "results.json").write_text(json.dumps(doc))
    return run


def test_the_merged_checklist_keeps_each_tiers_verdict(tmp_path):
    """An engine run must not wipe the harness's ticks: each tier's latest run stands next to the others."""
    _write_run(tmp_path, "harness", "20260101-000000", {"i4.concurrency": "failed"})
    newest = _write_run(
        tmp_path, "harness", "20260102-000000", {"i4.concurrency": "passed", "i5.state_freed": "passed"}
    )
    _write_run(tmp_path, "offline", "20260103-000000", {"i4.concurrency": "failed"})
    _write_run(tmp_path, "server", "20260103-000001", {"i4.concurrency": "passed"}, model="other")
    md_path, json_path = results.write_merged(tmp_path)
    assert results.latest_run(tmp_path, "harness") == newest
    data = json.loads(json_path.read_text())
    rows = {r["id"]: r for r in data["models"][MODEL]["checklist"]}
    assert data["models"][MODEL]["runs"] == {"harness": "harness-20260102-000000", "offline": "offline-20260103-000000"}
    assert rows["I4"]["mark"] == "[!]"  # the offline failure shows, the harness pass stays visible
    assert rows["I4"]["tiers"]["harness"]["mark"] == "[x]" and rows["I4"]["tiers"]["offline"]["mark"] == "[!]"
    assert rows["I5"]["mark"] == "[x]" and rows["I5"]["tiers"]["harness"]["checks"] == {"i5.state_freed": "passed"}
    md = md_path.read_text()
    assert "harness [x]" in md and "offline [!] **FAILED**: i4.concurrency" in md
    assert "## Integration Checklist — other" in md  # a model only one tier ran is there too


def test_readable_stacks_keep_the_models_frames():
    dump = (
        "Timeout (0:00:26)!\n"
        "Thread 0x02 (most recent call first):\n"
        '  File "/r/validators/runtime/timeouts.py", line 126 in watchdog\n'
        '  File "/usr/lib/python3.11/threading.py", line 982 in run\n\n'
        "Thread 0x01 (most recent call first):\n"
        '  File "/m/model.py", line 9 in forward\n'
        '  File "/v/site-packages/_pytest/python.py", line 187 in pytest_pyfunc_call\n'
        '  File "/v/site-packages/pluggy/_callers.py", line 1 in _multicall\n'
    )
    text = results.readable_stacks(dump)
    assert text.splitlines()[0] == "Timeout (0:00:26)!" and 'model.py", line 9 in forward' in text
    assert "watchdog" not in text and "pluggy" not in text and os.linesep not in text.replace("\n", "")
