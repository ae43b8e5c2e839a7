"""Released vLLM-Omni trees for the slow tests: fetched from PyPI at test time into the ignored
cache (`$OMNITTS_CACHE`, default ~/.cache/omnitts) through omnitts.scaffold.releases."""

from __future__ import annotations

from pathlib import Path

import pytest

RELEASES = ("0.14.0", "0.16.0", "0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0")


def release_tree(version: str) -> Path:
    releases = pytest.importorskip("omnitts.scaffold.releases")
    try:
        return releases.pristine_tree(version)
    except Exception as exc:  # no network / PyPI down: the slow tier cannot run here
        pytest.fail(f"could not fetch vllm-omni=={version} from PyPI: {exc}")
