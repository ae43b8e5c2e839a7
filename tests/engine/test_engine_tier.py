"""`pytest validators --omni-root DIR --model NAME --engine {offline,server}` on the three patterns scaffolded
into the newest release with a CPU engine (0.30.0): every engine check selected, run, and passed; none skipped.

Each case is one `pytest validators` session in a subprocess (as a contributor runs it): the tree's own offline
`Omni`, or the tree's own `vllm-omni serve` on 127.0.0.1 (started once, stopped at the end, checked below).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from omnitts.validators import checkids
from omnitts.validators.engine.pytest_options import backend_class
from omnitts.validators.verdicts import VERDICTS

from .conftest import scaffold

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
PATTERNS = ("single-stage", "two-stage", "native-ar")
# the check ids each tier runs: those its backend observes for (tests/runtime/test_verdicts.py pins them), less the
# parity checks, which only --reference CAPTURE selects (tests/engine/test_parity_qwen3_tts.py)
EXPECTED = {
    tier: {check for check in VERDICTS if backend_class(tier).runs(check) and check not in checkids.PARITY}
    for tier in ("offline", "server")
}


@pytest.fixture(scope="module")
def trees(tmp_path_factory, engine_python):
    """pattern -> a 0.30.0 tree with that pattern scaffolded (made on first use: a -k run scaffolds only its own)."""
    tmp = tmp_path_factory.mktemp("engine-trees")
    made: dict[str, Path] = {}

    def tree(pattern: str) -> Path:
        if pattern not in made:
            made[pattern] = scaffold(tmp, pattern, f"tiny_{pattern.replace('-', '_')}")
        return made[pattern]

    return tree


def _engine_processes(token: str) -> set[int]:
    """Live processes started under this case's session token (engines of other sessions on the machine are not
    ours to count)."""
    found = set()
    needle = f"OMNITTS_ENGINE_SESSION={token}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                found.add(int(pid))
        except OSError:
            continue
    return found


def check_of(name: str) -> str:
    """The check id of a junit test case name (``test_check[<check id>-<model>]``; a check id has no dash)."""
    return name.split("[", 1)[1].split("-", 1)[0]


@pytest.mark.parametrize("tier", ["offline", "server"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_engine_tier_passes_on_the_scaffolded_model(trees, tmp_path, pattern, tier):
    tree = trees(pattern)
    name = f"tiny_{pattern.replace('-', '_')}"
    junit = tmp_path / "junit.xml"
    token = uuid.uuid4().hex
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(REPO / "validators"),
            "-p",
            "no:cacheprovider",
            "-q",
            "--omni-root",
            str(tree),
            "--model",
            name,
            "--engine",
            tier,
            "--omnitts-out",
            str(tmp_path / "out"),
            f"--junitxml={junit}",
            "-o",
            "addopts=--import-mode=importlib",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=1200,
    )
    took = time.monotonic() - started
    cases = ET.parse(junit).getroot().iter("testcase") if junit.is_file() else []
    outcome = {}
    for case in cases:
        kind = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        outcome[check_of(case.get("name"))] = kind
    print(f"{pattern} {tier}: {took:.0f} s, {outcome}")
    assert proc.returncode == 0, f"{pattern} --engine {tier} failed ({took:.0f} s):\n{proc.stdout[-6000:]}"
    assert set(outcome) == EXPECTED[tier], f"selected checks: {sorted(outcome)}"
    assert set(outcome.values()) == {"passed"}, outcome
    # what a person gets (issue 20): the run's own folder, the engine's logs in it (path printed), WAVs of a pass
    from omnitts.validators.runtime.results import latest_run

    run = latest_run(tmp_path / "out", tier)
    assert run is not None and (run / "engine" / name).is_dir(), sorted((tmp_path / "out").iterdir())
    assert f"engine logs and outputs: {run / 'engine'}/<model>/" in proc.stdout
    if tier == "offline":
        assert list((run / "wav" / name).rglob("*.wav")), sorted(run.rglob("*"))[:40]
    leftover = _engine_processes(token)
    assert not leftover, f"engine processes left running after the session: {sorted(leftover)}"
