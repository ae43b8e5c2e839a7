"""docs/architecture.md cannot drift from the code: its generated tables equal what scripts/architecture.py reads from
the code (every console script, every package, the layer table, which backend runs which check)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("architecture", REPO / "scripts" / "architecture.py")
ARCH = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ARCH)


def test_the_generated_tables_are_current():
    text = ARCH.DOC.read_text(encoding="utf-8")
    names = [m.group(2) for m in ARCH.BLOCK.finditer(text)]
    assert sorted(names) == sorted(ARCH.BLOCKS), "every generated table is in the doc, once"
    assert text == ARCH.render(text), "docs/architecture.md is stale: python scripts/architecture.py --write"


def test_every_console_script_and_every_package_is_named():
    text = ARCH.DOC.read_text(encoding="utf-8")
    scripts = ARCH.console_scripts()
    assert {"omnitts-scaffold", "omnitts-lint", "omnitts-validate", "omnitts-probe", "omnitts-engine-env"} <= set(
        scripts
    )
    assert all(f"`{name}`" in text for name in scripts)
    for folder in ARCH.packages():
        assert f"`{folder.relative_to(REPO).as_posix()}/`" in text, folder
