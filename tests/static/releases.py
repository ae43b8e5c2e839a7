"""Released vLLM-Omni trees for the slow tests: fetched from PyPI at test time into the ignored
cache (`$OMNITTS_CACHE`, default ~/.cache/omnitts) through omnitts.knowledge.releases."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnitts.knowledge.runner import KNOWN_RELEASES as RELEASES

__all__ = ["RELEASES", "release_tree"]


def release_tree(version: str) -> Path:
    from omnitts.knowledge import releases

    try:
        return releases.pristine_tree(version)
    except Exception as exc:  # no network / PyPI down: the slow tier cannot run here
        pytest.fail(f"could not fetch vllm-omni=={version} from PyPI: {exc}")
