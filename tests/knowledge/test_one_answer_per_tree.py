"""One answer per tree: the scaffold (its layout profile), the harness (the runner contract of a tree model) and the
static rules (their tree facts) read the same version and the same async-chunk and request-id facts of a tree."""

from __future__ import annotations

import pytest

from omnitts.knowledge.eras import detect_profile
from omnitts.knowledge.releases import pristine_tree
from omnitts.knowledge.runner import contract_for
from omnitts.knowledge.treefacts import facts_for


@pytest.mark.parametrize("release", ["0.20.0", "0.24.0", "0.30.0"])
def test_scaffold_harness_and_rules_read_one_answer(release):
    root = pristine_tree(release)
    profile, contract, facts = detect_profile(root), contract_for(root), facts_for(root)
    assert profile.version == contract.version == facts.version == release
    assert (profile.chunk_payload_kwarg, profile.chunk_payload_struct) == (
        contract.chunk_payload_kwarg,
        contract.chunk_payload_struct,
    )
    # the keys the runner writes before preprocess() are keys a model may read; the v1 runner's is among them
    assert set(profile.request_id_keys) <= set(facts.request_id_keys)
    assert (contract.preprocess_id_key or "global_request_id") in profile.request_id_keys


def test_a_tree_models_contract_is_its_trees(tmp_path):
    """The harness steps a model of a tree with the tree's contract, not only its release row."""
    from omnitts.validators.runtime.subject import RuntimeSubject

    root = pristine_tree("0.30.0")
    subject = RuntimeSubject("m", "single-stage", "0.30.0", [], [], 16000, kind="tree", extra={"root": str(root)})
    assert subject.contract() == contract_for(root) != contract_for("0.30.0", "v2")
    subject.release = "0.20.0"  # --omni-release: another release's runner than the tree's
    assert subject.contract() == contract_for("0.20.0")
