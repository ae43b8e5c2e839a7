"""Shared fixtures: real vLLM-Omni releases from PyPI, cached under .cache/ (ignored by git)."""

from __future__ import annotations

import hashlib
import os
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
