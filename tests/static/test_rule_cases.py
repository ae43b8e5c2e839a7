"""Every rule's VALID and INVALID examples, executed (the examples are the rule's contract)."""

from __future__ import annotations

import pytest

from omnitts.validators.static import linter
from omnitts.validators.static.rule import Invalid

from .cases import run_case

RULES = linter.all_rules()
PARAMS = [
    pytest.param(rid, kind, i, id=f"{rid}-{kind}-{i}")
    for rid, rule in sorted(RULES.items())
    for kind, cases in (("valid", rule.VALID), ("invalid", rule.INVALID))
    for i, _ in enumerate(cases)
]


def _crash(self, src):
    raise RuntimeError("boom")
    yield  # pragma: no cover


@pytest.mark.parametrize("rid,kind,i", PARAMS)
def test_case(tmp_path, monkeypatch, rid, kind, i):
    rule = RULES[rid]
    case = (rule.VALID if kind == "valid" else rule.INVALID)[i]
    if rid == "OMNI-META-004" and kind == "invalid":
        monkeypatch.setattr(RULES["OMNI-INT-004"], "check", _crash)
    res = run_case(tmp_path, rule, case)
    mine = [f for f in res.findings if f.rule == rid]
    if kind == "valid":
        assert not mine, [f"{f.line}: {f.message}" for f in mine]
        assert not [f for f in res.findings if f.rule.startswith("OMNI-META")], res.findings
        assert not res.errors
        return
    assert isinstance(case, Invalid)
    assert len(mine) == case.count, [f"{f.path}:{f.line}: {f.message}" for f in res.findings]
    f = mine[0]
    assert f.path.replace("\\", "/").endswith(case.path), f.path
    if case.line is not None:
        assert f.line == case.line, f"{f.line}: {f.message}"
    assert case.message in f.message, f.message


def test_every_rule_has_cases_and_docs():
    for rid, rule in RULES.items():
        parts = rule.doc_parts()
        assert parts["what"] and parts["why"] and parts["fix"], rid
        assert rule.VALID and rule.INVALID, rid


FIXABLE = [
    pytest.param(rid, i, id=f"{rid}-fix-{i}")
    for rid, rule in sorted(RULES.items())
    for i, case in enumerate(rule.INVALID)
    if case.fixed is not None
]


@pytest.mark.parametrize("rid,i", FIXABLE)
def test_autofix_produces_expected_source(tmp_path, rid, i):
    from omnitts.validators.static.fixes import apply_fixes

    case = RULES[rid].INVALID[i]
    res = run_case(tmp_path, RULES[rid], case)
    n, _rest = apply_fixes([f for f in res.findings if f.rule == rid])
    assert n == case.count
    assert (tmp_path / case.path).read_text() == case.fixed
    again = run_case(tmp_path, RULES[rid], type(case)(code=case.fixed, path=case.path))
    assert not [f for f in again.findings if f.rule == rid]
