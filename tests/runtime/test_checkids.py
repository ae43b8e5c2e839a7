"""One check-id vocabulary: every id is produced by a check, every checklist item names produced ids, every mutant
names existing checks (omnitts.validators.checkids)."""

from __future__ import annotations

import inspect

import pytest

from omnitts.reference_models.catalog import CORRECT_CHECKS
from omnitts.reference_models.mutants import MUTANTS
from omnitts.validators import checkids
from omnitts.validators.runtime import checklist
from omnitts.validators.static.linter import all_rules
from omnitts.validators.verdicts import VERDICTS

# check id -> its verdict (validators/verdicts): what every backend's report of the check comes from
CHECK_FUNCTIONS = {check: judge.fn for check, judge in VERDICTS.items()}


def test_every_marked_check_is_in_the_vocabulary_and_back():
    assert sorted(CHECK_FUNCTIONS) == sorted(checkids.RUNTIME_CHECKS)


def _constant_names(value) -> set[str]:
    return {name for name, v in vars(checkids).items() if name.isupper() and v == value}


@pytest.mark.parametrize("tick", checkids.TICKS)
def test_every_tick_is_reported_by_its_check(tick):
    """The producing check's source reports the tick (by its constant, or by the table it iterates)."""
    producer = checkids.CHECKS[tick].produced_by
    assert producer in CHECK_FUNCTIONS, f"{tick}: produced by {producer}, which no check runs"
    source = inspect.getsource(CHECK_FUNCTIONS[producer])
    names = _constant_names(tick)
    if tick in checkids.STATIC_INVARIANT_TICKS.values():
        names.add("STATIC_INVARIANT_TICKS")
    names |= {n for n, v in vars(checkids).items() if n.isupper() and isinstance(v, dict) and tick in v.values()}
    module_source = inspect.getsource(inspect.getmodule(CHECK_FUNCTIONS[producer]))
    assert any(f"checkids.{n}" in source or f"checkids.{n}" in module_source for n in names), (
        f"{tick}: {producer}'s source does not report it"
    )


def test_deploy_rules_exist_and_static_lint_reports_them():
    rules = all_rules()
    assert all(r in rules for r in checkids.DEPLOY_RULES)
    assert "checkids.DEPLOY_RULES" in inspect.getsource(CHECK_FUNCTIONS[checkids.STATIC_LINT])


@pytest.mark.parametrize("item", [item[0] for item in checklist.ITEMS])
def test_every_checklist_item_is_produced_by_a_check(item):
    """An item names only ids a check reports; an item that no check covers says why (or is one a person ticks)."""
    _, _, text, checks = next(i for i in checklist.ITEMS if i[0] == item)
    for check in checks:
        assert checkids.producer(check) is not None, f"{item} names {check!r}, which no check reports"
        assert checkids.producer(check) in CHECK_FUNCTIONS


def test_orphan_items_are_manual_with_a_reason():
    """Stage-1 ``max_num_seqs`` (P2.5) has no check that could honestly tick it: it is manual and says why."""
    p25 = next(i for i in checklist.ITEMS if i[0] == "P2.5")
    assert p25[3] == () and "No check" in checklist.WHY["P2.5"]


def test_checklist_follows_the_releases_request_ids():
    """Issue 12.8: the I5 item names the keys releases set, not the guide's ``_omni_req_id``, and says why."""
    i5 = next(i for i in checklist.ITEMS if i[0] == "I5")
    assert "_omni_req_id" not in i5[2]
    assert all(k in i5[2] for k in ("`request_id`", "`req_id`", "`global_request_id"))
    assert "_omni_req_id" in checklist.WHY["I5"] and "no release" in checklist.WHY["I5"]
    rows = checklist.tick({checkids.I5_STATE_FREED: "passed"}, "two-stage")
    md = checklist.render_markdown("m", rows)
    assert "*Why:*" in md and "Model Runner V2" in md


def test_ticks_of_a_skipped_check_show_as_skipped():
    rows = {r["id"]: r for r in checklist.tick({checkids.INTEGRATION_POINTS: "skipped"}, "two-stage")}
    assert rows["P2.1"]["state"] == "skipped" and rows["P3.1"]["state"] == "skipped"
    rows = {r["id"]: r for r in checklist.tick({checkids.INTEGRATION_REGISTRY: "passed"}, "two-stage")}
    assert rows["P2.1"]["state"] == "passed"


@pytest.mark.parametrize("name", list(MUTANTS))
def test_every_mutant_names_existing_checks(name):
    rules = all_rules()
    for check in MUTANTS[name].checks:
        if checkids.is_rule_id(check):
            assert check in rules, f"{name}: no static rule {check}"
        else:
            assert checkids.producer(check) in CHECK_FUNCTIONS, f"{name}: no check produces {check!r}"
    assert checkids.targets(MUTANTS[name].checks), name


def test_correct_models_name_existing_checks():
    assert all(c in checkids.RUNTIME_CHECKS for c in CORRECT_CHECKS)


def test_unknown_ids_are_refused():
    with pytest.raises(ValueError, match="unknown check id 'I4-concurrency'"):
        checkids.require("I4-concurrency")
    assert checkids.require(checkids.I4_CONCURRENCY) == "i4.concurrency"
    assert checkids.require("OMNI-INT-001") == "OMNI-INT-001"
    assert not checkids.known("OMNI-XX-999") and checkids.known("OMNI-I5-001")
