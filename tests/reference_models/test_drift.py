"""One source of truth: the committed reference models are the standalone renders of the pattern templates, and
the vllm_omni render (what ``omnitts-scaffold new`` writes) differs from them only in its import/logger lines."""

from __future__ import annotations

import difflib
import re

import pytest

from omnitts.reference_models import render_references
from omnitts.reference_models.render_references import PATTERNS, REFERENCE_DIR, rendered_files

pytest.importorskip("cookiecutter")


@pytest.mark.parametrize("name", list(PATTERNS))
def test_committed_reference_equals_a_fresh_render(name, tmp_path):
    fresh = rendered_files(render_references.render_reference(name, tmp_path / name))
    committed = rendered_files(REFERENCE_DIR / name)
    differing = sorted(path for path in fresh.keys() | committed.keys() if fresh.get(path) != committed.get(path))
    assert not differing, (
        f"reference_models/{name} drifted from templates/patterns/{PATTERNS[name]} in {differing}; "
        "run `python -m omnitts.reference_models.render_references` and commit the result"
    )


TARGET_LINES = re.compile(
    r"^(import logging"
    r"|from vllm\.logger import init_logger"
    r"|from omnitts\.reference_models\.contract import OmniOutput"
    r"|from vllm_omni\.model_executor\.models\.output_templates import OmniOutput"
    r"|logger = (logging\.getLogger|init_logger)\(__name__\)"
    r"|)$"
)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_scaffold_target_differs_only_in_import_lines(name, tmp_path):
    pattern = PATTERNS[name]
    vllm = rendered_files(
        render_references.render(
            pattern, render_references.reference_context(name, pattern, target="vllm_omni"), tmp_path / "vllm"
        )
    )
    standalone = rendered_files(REFERENCE_DIR / name)
    assert vllm.keys() == standalone.keys()
    for path in sorted(vllm):
        a, b = standalone[path].decode().splitlines(), vllm[path].decode().splitlines()
        changed = [
            line
            for line in difflib.unified_diff(a, b, lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        ]
        stray = [line for line in changed if not TARGET_LINES.match(line[1:])]
        assert not stray, f"{path}: the targets differ beyond import/logger lines: {stray}"
