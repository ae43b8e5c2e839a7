"""Runs a rule's VALID/INVALID case in a throw-away tree (shared by the case tests and the docs)."""

from __future__ import annotations

from pathlib import Path

from omnitts.validators.static import api
from omnitts.validators.static.rule import Rule, Valid


def write_case(root: Path, case: Valid) -> None:
    for rel, text in case.all_files().items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def run_case(root: Path, rule: type[Rule], case: Valid):
    """All findings of the run (META included); the run selects only `rule` (META rules always run
    with it, and suppression cases also run the rule they suppress)."""
    write_case(root, case)
    select = [rule.id]
    if rule.invariant == "META":
        select = None
    if rule.scope == "tree":
        return api.run([root], root=root, select=select, integration=True)
    return api.run([root / case.path], root=root, select=select)
