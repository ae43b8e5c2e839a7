"""docs/rules.md is generated from the rule classes and must be up to date."""

from omnitts.validators.static import gen_docs


def test_rules_md_up_to_date():
    assert gen_docs.main(["--check"]) == 0, "run: python -m omnitts.validators.static.gen_docs"


def test_every_rule_has_a_section():
    text = gen_docs.DEFAULT_OUT.read_text()
    from omnitts.validators.static.linter import all_rules

    for rid in all_rules():
        assert f"\n## {rid}\n" in text
