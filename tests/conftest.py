"""Shared fixtures: real vLLM-Omni releases from PyPI, cached under .cache/ (ignored by git)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("OMNITTS_CACHE", str(REPO / ".cache"))

from omnitts.knowledge import releases  # noqa: E402  (reads OMNITTS_CACHE)

SOURCE_RELEASE = "0.20.0"  # the release the guide was written for; PyPI has its sdist


@pytest.fixture(scope="session")
def pristine():
    """version -> pristine extracted release (never modify it)."""
    return releases.pristine_tree


@pytest.fixture
def work_tree(tmp_path, pristine):
    """version -> a fresh, writable copy of that release under tmp_path."""

    def make(version: str) -> Path:
        dest = tmp_path / f"vllm-omni-{version}"
        shutil.copytree(pristine(version), dest)
        return dest

    return make


def tree_hash(root: Path) -> str:
    """One hash over every file's path, bytes and mode: 'the tree is unchanged' means this is equal."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and ".git" not in p.parts):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
        digest.update(str(path.stat().st_mode).encode())
    return digest.hexdigest()


@pytest.fixture
def hash_tree():
    return tree_hash


def pytest_configure(config):
    # Some tests import the runtime checks (validators/checks) without the validators plugin: their markers are the
    # plugin's, registered from the same list so that no PytestUnknownMarkWarning is raised.
    from omnitts.validators.plugin import register_markers

    register_markers(config)


def engine_requested(markexpr: str) -> bool:
    """Whether a ``-m`` expression asks for the engine tier itself (``engine``, ``engine and ...``), not only
    mentions it negated (``not engine``) or leaves it out (``not slow``)."""
    return bool(re.search(r"(?<!not )\bengine\b", markexpr or ""))


def pytest_collection_modifyitems(config, items):
    """The engine tier runs only when asked for by name: ``-m "not slow"`` (or any ``-m`` that leaves ``engine`` out)
    replaces the configured ``-m "not engine"``, and would otherwise build the engine's multi-GB environment and run
    its sessions inside a quick run (README, "quick tier")."""
    if engine_requested(config.getoption("markexpr")):
        return
    engine = [item for item in items if item.get_closest_marker("engine")]
    if engine:
        config.hook.pytest_deselected(items=engine)
        items[:] = [item for item in items if not item.get_closest_marker("engine")]
