"""The rules against the reference models: every mutant a static rule can see is reported by the
right rule, the correct models and the scaffold's freshly generated models report nothing."""

from __future__ import annotations

import pytest

from omnitts.validators import checkids
from omnitts.validators.static import api

catalog = pytest.importorskip("omnitts.reference_models.catalog")

# Mutants the catalog marks for the runtime tier only, which the static rules also catch (the rule
# that must report each one).
ALSO_STATIC = {
    "ref_two_stage@buffer-view": "OMNI-I5-005",
    "ref_two_stage@break-first": "OMNI-I4-003",
    "ref_single_stage@batch-first": "OMNI-I4-001",
    "ref_single_stage@batch-flag": "OMNI-I4-004",
    "ref_single_stage@abort-leak": "OMNI-I5-003",
    "ref_native_ar@last-wins": "OMNI-I4-002",
    "ref_native_ar@state-leak": "OMNI-I5-003",
}


def _lint(subject):
    return api.lint_model_package(subject.root / "models" / subject.model)


def _expected(name, subject) -> set[str]:
    rules = set(checkids.rule_ids(subject.expected_checks))
    if name in ALSO_STATIC:
        rules.add(ALSO_STATIC[name])
    return rules


NAMES = catalog.list_models()


@pytest.mark.parametrize("name", [n for n in NAMES if "@" not in n])
def test_correct_reference_model_is_clean(name):
    findings = _lint(catalog.get_subject(name))
    assert not findings, [f"{f.path}:{f.line}: {f.rule} {f.message}" for f in findings]


@pytest.mark.parametrize("name", [n for n in NAMES if "@" in n])
def test_mutant_reported_by_the_right_rule(name):
    subject = catalog.get_subject(name)
    expected = _expected(name, subject)
    findings = _lint(subject)
    got = {f.rule for f in findings}
    assert expected <= got, (expected, [f"{f.path}:{f.line}: {f.rule} {f.message}" for f in findings])
    if expected:
        # The finding sits in a file the mutant patched (not somewhere unrelated).
        patched = set(subject.patched_files)
        hits = [f for f in findings if f.rule in expected]
        assert any(any(f.path.replace("\\", "/").endswith(p) for p in patched) for f in hits), (patched, hits)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.20.0", "0.22.0"])
def test_scaffold_output_is_clean(work_tree, version):
    from omnitts.scaffold.cli import main
    from omnitts.scaffold.naming import PATTERNS

    root = work_tree(version)
    for pattern in PATTERNS:
        name = f"demo_{pattern.replace('-', '_')}"
        assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
        findings = api.lint_model_package(root / "vllm_omni/model_executor/models" / name, tree_root=root)
        generated = [p for p in (root / "examples").rglob(f"*{name}*") if p.is_dir()]
        generated += list((root / "tests").rglob(f"test_{name}.py"))
        findings += api.lint_paths(generated, root=root) if generated else []
        assert not findings, [f"{f.path}:{f.line}: {f.rule} {f.message}" for f in findings]
