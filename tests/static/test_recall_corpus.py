"""The static-recall corpus (benchmarks/corpus/static_recall.json) is well-formed data, and every
location it names resolves in the PyPI release it names (slow part: the releases are fetched)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .releases import RELEASES, release_tree

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus" / "static_recall.json"
MINED = RELEASES[: RELEASES.index("0.24.0") + 1]  # later releases judge generalisation: never mined
INVARIANTS = {"I1", "I2", "I3", "I4", "I5", "INT", "HOP", "SRV"}
BUG_FIELDS = {"id", "release", "path", "lines", "invariant", "fixed_release", "fixed_lines", "source_visible", "why"}
OK_FIELDS = {"id", "release", "path", "lines", "invariant", "why"}


def _v(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


@pytest.fixture(scope="module")
def corpus() -> dict:
    return json.loads(CORPUS.read_text())


def test_corpus_is_well_formed(corpus):
    bugs, oks = corpus["bugs"], corpus["lookalikes"]
    assert len(bugs) >= 40 and len(oks) >= 30
    ids = [e["id"] for e in bugs + oks]
    assert len(ids) == len(set(ids)), "duplicate ids"
    for bug in bugs:
        assert set(bug) == BUG_FIELDS, bug["id"]
        assert bug["release"] in MINED and bug["fixed_release"] in MINED, bug["id"]
        assert _v(bug["fixed_release"]) > _v(bug["release"]), bug["id"]
        assert isinstance(bug["source_visible"], bool)
        if bug["source_visible"]:
            assert bug["invariant"] in INVARIANTS - {"HOP", "SRV"}, bug["id"]  # a rule family can report it
        if bug["fixed_lines"] is not None:
            a, b = bug["fixed_lines"]
            assert 0 < a <= b, bug["id"]
    for ok in oks:
        assert set(ok) == OK_FIELDS, ok["id"]
        assert ok["release"] in MINED, ok["id"]
    for e in bugs + oks:
        a, b = e["lines"]
        assert 0 < a <= b and b - a < 40, e["id"]
        assert e["invariant"] in INVARIANTS, e["id"]
        assert e["why"].strip() and "\n" not in e["why"], e["id"]
        assert not e["path"].startswith("/") and ".." not in e["path"], e["id"]


@pytest.mark.slow
def test_corpus_locations_resolve(corpus):
    """Each span lies inside its file in the named release and is not blank; a bug's fixed span lies
    inside the fixed release's file (or the file is gone there, `fixed_lines` null), and the fixed
    release changed the buggy lines."""
    trees = {v: release_tree(v) for v in MINED}
    for e in corpus["bugs"] + corpus["lookalikes"]:
        f = trees[e["release"]] / e["path"]
        assert f.is_file(), (e["id"], str(f))
        lines = f.read_text(errors="replace").splitlines()
        a, b = e["lines"]
        assert b <= len(lines), e["id"]
        assert any(line.strip() for line in lines[a - 1 : b]), e["id"]
    for bug in corpus["bugs"]:
        fixed = trees[bug["fixed_release"]] / bug["path"]
        if bug["fixed_lines"] is None:
            assert not fixed.exists(), bug["id"]
            continue
        fixed_lines = fixed.read_text(errors="replace").splitlines()
        fa, fb = bug["fixed_lines"]
        assert fb <= len(fixed_lines), bug["id"]
        a, b = bug["lines"]
        old = (trees[bug["release"]] / bug["path"]).read_text(errors="replace").splitlines()[a - 1 : b]
        assert old != fixed_lines[fa - 1 : fb], f"{bug['id']}: the fixed release did not change these lines"
