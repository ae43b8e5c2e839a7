"""The layers, enforced: a table of the edges allowed between omnitts's top-level packages (knowledge and console at
the bottom), no cycle among them, every import counted (function-local ones and imports by name too), and nothing
outside the knowledge layer's era objects and runner table compares eras or release numbers."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GRAPH = _script("import_graph")


def test_every_import_between_packages_is_an_allowed_edge():
    assert GRAPH.violations() == []


def test_the_table_covers_every_package_and_has_no_cycle():
    assert set(GRAPH.ALLOWED) == set(GRAPH.LAYERS) | {"templates"}
    assert GRAPH.cycles(GRAPH.ALLOWED) == []
    assert GRAPH.ALLOWED["knowledge"] == set() and GRAPH.ALLOWED["console"] == set()


def test_the_packages_import_one_another_without_a_cycle():
    assert GRAPH.cycles(GRAPH.layer_edges()) == []


def test_plugin_edges_point_down_the_table():
    """A package that plugs into another (entry points) lies above it: the consumer imports nothing of it."""
    edges = GRAPH.plugin_edges()
    assert ("omnitts.model_catalogs", "reference_models", "validators") in edges
    for _, provider, consumer in edges:
        assert consumer in GRAPH.ALLOWED[provider]
        assert provider not in GRAPH.layer_edges()[consumer]


def test_imports_by_name_and_inside_functions_are_counted(tmp_path):
    source = (
        "import importlib\n"
        'PLUGIN = "omnitts.validators.plugin"\n'
        "def f(pm):\n"
        "    from omnitts.scaffold import check\n"
        '    importlib.import_module("omnitts.reference_models.catalog")\n'
        "    pm.import_plugin(PLUGIN)\n"
        'pytest_plugins = ("omnitts.validators.engine.pytest_options",)\n'
        'SCHEMA = "omnitts.observations"  # a name, not an import\n'
    )
    path = REPO / "knowledge" / "_probe_of_the_graph.py"
    found = set()
    try:
        path.write_text(source)
        found = GRAPH.imports_of(path)
    finally:
        path.unlink()
    assert found == {
        "omnitts.scaffold",
        "omnitts.scaffold.check",
        "omnitts.reference_models.catalog",
        "omnitts.validators.plugin",
        "omnitts.validators.engine.pytest_options",
    }


def test_other_layers_import_the_knowledge_layer():
    graph = GRAPH.graph()
    for layer in ("scaffold", "validators"):
        assert any(
            d.startswith("omnitts.knowledge") for s, ds in graph.items() if s.startswith(f"omnitts.{layer}") for d in ds
        ), layer


# Files of other work in progress (the scaffold's, the static rules'), each with the name it still renames: the list
# may only shrink.
RENAMING_LEFT = {
    "knowledge/treefacts.py: ADAPTERS as TTS_ADAPTERS",  # the names the static rules import (next two lines)
    "knowledge/treefacts.py: MODELS as TREE_MODELS",
    "validators/static/rules/integration_layout.py: EXAMPLES_OFFLINE as OFFLINE",
    "validators/static/rules/integration_layout.py: EXAMPLES_ONLINE as ONLINE",
    "validators/static/rules/integration_layout.py: TREE_MODELS as MODELS",
    "validators/static/rules/integration_layout.py: TTS_ADAPTERS as ADAPTERS",
    "validators/static/rules/integration_layout.py: TTS_HUB as HUB",
    "validators/static/api.py: treefacts as tf",
    "validators/static/changes.py: treefacts as tf",
    "tests/static/releases.py: KNOWN_RELEASES as RELEASES",
    "tests/static/test_precommit_hooks.py: main as scaffold",
    "scaffold/errors.py: TreeError as ScaffoldError",  # the scaffold's name for the knowledge layer's TreeError
    "scaffold/new.py: shared_file_patches as _integration_patches",
    "scaffold/new.py: _run_file_patches as run",
    "scaffold/render.py: omnitts.templates as package",
}


def test_no_renaming_on_import():
    """One name, one meaning: an omnitts module or name is imported under its own name (``from x import a``,
    ``import omnitts.x.y``), never ``as`` something else."""
    renamed = []
    for layer in (*GRAPH.LAYERS, "tests", "benchmarks", "scripts"):
        for path in sorted((REPO / layer).rglob("*.py")):
            if "/ref_" in path.as_posix() or ".cache" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("omnitts"):
                    renamed += [f"{path.relative_to(REPO)}: {a.name} as {a.asname}" for a in node.names if a.asname]
                elif isinstance(node, ast.Import):
                    renamed += [
                        f"{path.relative_to(REPO)}: {a.name} as {a.asname}"
                        for a in node.names
                        if a.asname and a.name.startswith("omnitts")
                    ]
    assert sorted(set(renamed) - RENAMING_LEFT) == []


def test_no_era_tests_outside_the_era_objects():
    assert _script("era_tests").era_tests() == []


def test_era_test_counter_sees_era_tests():
    counter = _script("era_tests")
    for line in ("if profile.era == FIVE_POINT:", "if minor >= 20:", 'x = a if self.era in ("0.26", "0.30") else b'):
        assert counter.ERA_TEST.search(line), line
    assert not counter.ERA_TEST.search('if profile.point("adapter"):')
