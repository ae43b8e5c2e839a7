"""benchmarks/engine_mutants.py without an engine: every mutant applies to the scaffolded single-stage model of the
newest CPU-engine release (its snippet occurs exactly once, the result compiles and differs), and the verdicts are
read from a session's results the way the harness matrix reads them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "engine_mutants.py"


@pytest.fixture(scope="module")
def em():
    spec = importlib.util.spec_from_file_location("engine_mutants", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["engine_mutants"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def base(em, tmp_path_factory):
    return em.scaffold(tmp_path_factory.mktemp("engine-mutants"))


def test_every_mutant_applies_once_and_compiles(em, base, tmp_path):
    subjects = em.subjects()
    assert subjects[0].name == "correct" and not subjects[0].patches
    assert len({s.name for s in subjects}) == len(subjects)
    for subject in subjects[1:]:
        assert subject.patches and subject.targets, subject.name
        tree = em.mutate(base, subject, tmp_path / subject.name)
        for rel in {rel for rel, _, _ in subject.patches}:
            mutated, original = (tree / rel).read_text(), (base / rel).read_text()
            assert mutated != original, subject.name
            if rel.endswith(".py"):
                compile(mutated, rel, "exec")


def test_a_snippet_that_is_not_there_is_one_line(em, base, tmp_path):
    bad = em.Subject("bad", "", ((em.MODEL_FILE, "no such line\n", "x\n"),), ("i4.concurrency",))
    with pytest.raises(SystemExit, match="occurs 0 times"):
        em.mutate(base, bad, tmp_path / "bad")


def test_verdicts(em):
    mutant = em.Subject("m", "", (), ("i4.concurrency",))
    run = {"results": {"i4.concurrency": "failed", "i1.duration_and_sr": "passed"}}
    run["failures"] = {"i4.concurrency": "I4"}
    assert em.verdict(mutant, run)["verdict"] == "CAUGHT by i4.concurrency"
    run = {"results": {"i4.concurrency": "passed"}, "failures": {}}
    assert em.verdict(mutant, run)["verdict"] == "MISSED"
    run = {"results": {"i1.duration_and_sr": "failed"}, "failures": {"i1.duration_and_sr": "I1"}}
    assert em.verdict(mutant, run)["verdict"].startswith("caught by other checks (i1.duration_and_sr)")
    worker = em.Subject("w", "", (), ("i5.state_freed", "i5.no_growth"))
    offline = {"results": {"i4.concurrency": "passed"}, "failures": {}}
    assert em.verdict(worker, offline)["verdict"].startswith("MISSED: no check")
    assert em._pending(worker, offline)
    assert not em._pending(worker, {"results": {"i5.state_freed": "passed"}})
    correct = em.Subject("correct", "", (), ())
    assert em.verdict(correct, {"results": {"x": "passed"}, "failures": {}})["verdict"] == "PASS"
    assert em.verdict(correct, {"error": "no results.json"})["verdict"] == "ERROR"


def test_the_doc_section_replaces_itself_and_keeps_the_harness_matrix(em, tmp_path):
    doc = tmp_path / "mutant_matrix.md"
    doc.write_text("# Mutant matrix\n\nharness rows\n")
    row = {
        "subject": "correct",
        "catalog": None,
        "targets": [],
        "harness": {"verdict": "PASS", "says": ""},
        "engine": {"verdict": "PASS", "says": ""},
    }
    meta = {"when": "now", "machine": "m", "sessions": 2, "session_wall_s": 1.0}
    em.write_doc(doc, [row], meta)
    em.write_doc(doc, [row], meta)
    text = doc.read_text()
    assert text.startswith("# Mutant matrix\n\nharness rows\n") and text.count(em.SECTION) == 1
    assert "| `correct` | — | — | PASS | PASS |" in text
