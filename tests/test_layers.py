"""Issue 9's layering, enforced: the knowledge layer imports no other layer, and nothing outside its era
objects and runner table compares eras or release numbers."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_knowledge_imports_no_other_layer():
    graph = _script("import_graph").graph()
    outside = sorted(
        f"{src} -> {dst}"
        for src, dsts in graph.items()
        if src.startswith("omnitts.knowledge")
        for dst in dsts
        if not dst.startswith("omnitts.knowledge")
    )
    assert outside == []


def test_other_layers_import_the_knowledge_layer():
    graph = _script("import_graph").graph()
    for layer in ("scaffold", "validators"):
        assert any(
            d.startswith("omnitts.knowledge") for s, ds in graph.items() if s.startswith(f"omnitts.{layer}") for d in ds
        ), layer


def test_no_era_tests_outside_the_era_objects():
    assert _script("era_tests").era_tests() == []


def test_era_test_counter_sees_era_tests():
    counter = _script("era_tests")
    for line in ("if profile.era == FIVE_POINT:", "if minor >= 20:", 'x = a if self.era in ("0.26", "0.30") else b'):
        assert counter.ERA_TEST.search(line), line
    assert not counter.ERA_TEST.search('if profile.point("adapter"):')
