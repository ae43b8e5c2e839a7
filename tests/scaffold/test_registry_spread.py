"""A registry dict with a `**spread` (`_OMNI_MODELS = {**_EXTRA, ...}`) is patched, and the patch reversed
byte for byte, wherever the spread sits; it used to be an internal error when it was the last element."""

from __future__ import annotations

import textwrap

import pytest

from omnitts.knowledge import layout
from omnitts.scaffold.cli import main
from omnitts.scaffold.codemods.base import run_codemod
from omnitts.scaffold.codemods.registry import AddDictNameEntry, AddDictTupleEntry, RemoveDictEntry

ENTRY = ("new", "modeling_new", "NewCls")
SOURCES = {
    "last": '_OMNI_MODELS = {\n    "A": ("a", "m", "A"),\n    "B": ("b", "m", "B"),\n    **_EXTRA,\n}\n',
    "first": '_OMNI_MODELS = {\n    **_EXTRA,\n    "A": ("a", "m", "A"),\n}\n',
    "middle": '_OMNI_MODELS = {\n    "A": ("a", "m", "A"),\n    **_EXTRA,\n    "B": ("b", "m", "B"),\n}\n',
    "only": "_OMNI_MODELS = {\n    **_EXTRA,\n}\n",
    "two": "_OMNI_MODELS = {\n    **_ONE,\n    **_TWO,\n}\n",
}


@pytest.mark.parametrize("where", sorted(SOURCES))
def test_a_tuple_entry_beside_a_spread_is_added_and_removed_exactly(where):
    source = SOURCES[where]
    kwargs = dict(dict_name="_OMNI_MODELS", key="New", what="architecture")
    added = run_codemod(AddDictTupleEntry, source, "registry.py", values=ENTRY, **kwargs)
    assert '"New": (' in added and "**_" in added
    compile(added, "registry.py", "exec")
    assert run_codemod(AddDictTupleEntry, added, "registry.py", values=ENTRY, **kwargs) == added  # idempotent
    assert run_codemod(RemoveDictEntry, added, "registry.py", value=ENTRY, **kwargs) == source


def test_a_name_entry_beside_a_spread_is_added_and_removed_exactly():
    source = textwrap.dedent(
        """\
        OMNI_PIPELINES: dict[str, object] = {
            "a": A_PIPELINE,
            **_PLUGINS,
        }
        """
    )
    kwargs = dict(dict_name="OMNI_PIPELINES", key="new", what="pipeline key")
    added = run_codemod(AddDictNameEntry, source, "pipeline_registry.py", value="NEW_PIPELINE", **kwargs)
    assert '"new": NEW_PIPELINE' in added
    assert run_codemod(RemoveDictEntry, added, "pipeline_registry.py", value="NEW_PIPELINE", **kwargs) == source


def test_new_and_remove_on_a_tree_whose_registries_end_in_a_spread(work_tree, hash_tree, capsys):
    root = work_tree("0.30.0")
    for rel, anchor in ((layout.REGISTRY, "_OMNI_MODELS = {"), (layout.PIPELINE_REGISTRY, "OMNI_PIPELINES: dict")):
        path = root / rel
        text = path.read_text()
        end = text.index("\n}\n", text.index(anchor))
        path.write_text("_EXTRA = {}\n" + text[:end] + "\n    **_EXTRA," + text[end:])
    before = hash_tree(root)
    assert main(["new", "spread_tts", "--pattern", "two-stage", "--target", str(root)]) == 0
    assert main(["check", "spread_tts", "--target", str(root)]) == 0
    capsys.readouterr()
    assert main(["remove", "spread_tts", "--target", str(root)]) == 0
    assert hash_tree(root) == before
