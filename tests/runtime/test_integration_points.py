"""The integration-points check (``integration.points``) on release trees: it ticks the registry, deploy and serving
checklist items from ``omnitts-scaffold check``, fails on a gap, and skips a model that lives in no tree."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from omnitts.knowledge.releases import pristine_tree
from omnitts.validators import checkids
from omnitts.validators.backends.base import judge
from omnitts.validators.backends.harness import HarnessBackend


def _run(name: str, kind: str, root=None):
    ctx = SimpleNamespace(subject=SimpleNamespace(name=name, kind=kind, extra={"root": str(root)}))
    verdict = judge(HarnessBackend(ctx), checkids.INTEGRATION_POINTS)
    if verdict.outcome == "failed":
        pytest.fail(verdict.message(), pytrace=False)
    if verdict.outcome == "not applicable":
        pytest.skip(verdict.headline)
    return {"gaps": verdict.metrics["gaps"], "extra_checks": verdict.ticks}


def test_a_complete_model_ticks_registry_deploy_and_serving():
    recorded = _run("cosyvoice3", "tree", pristine_tree("0.30.0"))
    assert recorded["gaps"] == []
    assert recorded["extra_checks"] == {
        checkids.INTEGRATION_REGISTRY: "passed",
        checkids.INTEGRATION_DEPLOY: "passed",
        checkids.INTEGRATION_SERVING: "passed",
    }


def test_a_gap_fails_the_check_and_names_the_point():
    """0.20.0's cosyvoice3 has inconsistent examples and hub README (docs/check_report.md); its registry, deploy and
    serving points are present."""
    with pytest.raises(pytest.fail.Exception, match="examples: inconsistent"):
        _run("cosyvoice3", "tree", pristine_tree("0.20.0"))


def test_an_unknown_model_fails_closed():
    with pytest.raises(pytest.fail.Exception, match="no model .no_such_tts. in this tree"):
        _run("no_such_tts", "tree", pristine_tree("0.30.0"))


def test_a_catalog_model_is_skipped_with_the_reason():
    with pytest.raises(pytest.skip.Exception, match="not in a vLLM-Omni tree"):
        _run("ref_two_stage", "reference")
