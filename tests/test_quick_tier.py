"""The quick tier is quick whatever ``-m`` says: engine tests (the multi-GB engine environment, minutes per session)
run only when ``-m`` names ``engine`` (tests/conftest.py), not under the README's ``-m "not slow"``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from conftest import engine_requested  # noqa: E402


def _collected(*args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return [line for line in proc.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize(
    ("markexpr", "wanted"),
    [("not engine", False), ("not slow", False), ("", False), ("engine", True), ("engine and not slow", True)],
)
def test_engine_is_requested_by_name_only(markexpr, wanted):
    assert engine_requested(markexpr) is wanted


def test_not_slow_collects_no_engine_test_and_engine_does():
    quick = _collected("tests/engine/test_probe.py", "-m", "not slow")
    engine = _collected("tests/engine/test_probe.py", "-m", "engine")
    assert quick and not any("against_the_real_server" in line for line in quick)
    assert [line for line in engine if "against_the_real_server" in line]
