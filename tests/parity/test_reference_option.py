"""``--reference CAPTURE`` selects the parity checks: refused in one line where it cannot work (no capture, a tier
that cannot run them), deselected with the reason when absent, collected when given."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from omnitts.validators import checkids
from omnitts.validators.engine.pytest_options import reference_problem
from omnitts.validators.parity.capture_file import CapturedRequest, write_capture

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def capture(tmp_path) -> Path:
    arrays = {"codes": np.zeros((3, 2), dtype=np.int64), "waveform": np.zeros(10, np.float32)}
    manifest = {"dtype": "float32", "sample_rate": 24000, "reference": {"package": "x"}}
    return write_capture(tmp_path / "cap", manifest, [CapturedRequest("r0", "Hello.", {}, arrays)])


def test_reference_problems_are_one_line(capture, tmp_path):
    assert reference_problem("offline", None) is None
    assert reference_problem("offline", str(capture)) is None
    assert reference_problem("harness", str(capture)) is None  # omnitts's reference models
    assert "cannot run the parity checks; use --engine offline" in reference_problem("server", str(capture))
    missing = reference_problem("offline", str(tmp_path / "nope"))
    assert "no manifest.json" in missing and "\n" not in missing


def _collect(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", str(REPO / "validators"), "--collect-only", "-q", "-p", "no:cacheprovider"]
    cmd += ["--model", "ref_two_stage", "--omnitts-out", str(tmp_path / "out"), *flags]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)


def test_parity_checks_are_selected_by_reference_only(capture, tmp_path):
    without = _collect(tmp_path)
    assert not any(f"test_check[{c}-" in without.stdout for c in checkids.PARITY), without.stdout[-3000:]
    assert f"{checkids.PARITY_CODES}: needs --reference CAPTURE" in without.stdout
    given = _collect(tmp_path, "--reference", str(capture))
    assert all(f"test_check[{c}-ref_two_stage]" in given.stdout for c in checkids.PARITY), given.stdout[-3000:]
    refused = _collect(tmp_path, "--reference", str(tmp_path / "nope"))
    assert refused.returncode == 4 and "--reference" in refused.stderr and "no manifest.json" in refused.stderr
