"""The scaffold's three patterns against their HF-style references through capture: ``omnitts-capture`` runs the
reference adapters (``reference_models/adapters/hf_patterns.py``), the harness backend observes the reference models
on the capture's texts (each alone, then all at once) and the parity verdicts judge, as ``pytest validators --model
NAME --reference CAPTURE`` does. Correct models: codes (or latents) and waveforms equal; mutants whose audio the
harness's own reference check flags are caught by parity too, with their codes still equal (the bug lies after the
generator)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from omnitts.reference_models.adapters.hf_patterns import ADAPTERS
from omnitts.validators import checkids
from omnitts.validators.backends.base import judge
from omnitts.validators.backends.harness import HarnessBackend
from omnitts.validators.parity import cli
from omnitts.validators.parity.capture_file import read_capture
from omnitts.validators.parity.compare import compare_waveforms
from omnitts.validators.runtime.catalogs import installed
from omnitts.validators.runtime.context import EngineOptions, ModelContext, Options

MODELS = sorted(ADAPTERS)
TEXTS = ("Hello there.", "A second, longer sentence.", "Third!")  # different lengths, served at once


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    found = {}
    for model in MODELS:
        work = tmp_path_factory.mktemp(model)
        (work / "requests.json").write_text(json.dumps([{"id": f"r{i}", "text": t} for i, t in enumerate(TEXTS)]))
        adapter = f"omnitts.reference_models.adapters.hf_patterns:{ADAPTERS[model].__name__}"
        args = cli._parser().parse_args(
            ["--adapter", adapter, "--python", sys.executable, "--checkpoint", str(work / "ckpt"),
             "--out", str(work / "cap"), "--random-checkpoint", "--requests", str(work / "requests.json")]
        )  # fmt: skip
        cli.capture(args)
        found[model] = read_capture(work / "cap")
    return found


REPO = Path(__file__).resolve().parents[2]
JUDGED = (checkids.PARITY_CODES, checkids.PARITY_END_TO_END, checkids.PARITY_BATCHED)


def _verdicts(name: str, capture, tmp_path) -> dict:
    """check id -> the parity verdict of ``name`` (a reference model or a mutant) against ``capture``, harness tier."""
    engine = EngineOptions(reference=capture.folder)
    options = Options(out_dir=tmp_path, timeout=300, catalogs=installed(), engine=engine)
    backend = HarnessBackend(ModelContext(name, options))
    return {check: judge(backend, check) for check in checkids.PARITY}


@pytest.mark.parametrize("model", MODELS)
def test_correct_pattern_matches_its_reference_capture(captures, model, tmp_path):
    capture = captures[model]
    assert capture.manifest["reference"]["adapter"].endswith(ADAPTERS[model].__name__)
    for req in capture.requests:  # the reference's decoder alone reproduces its own generate's waveform
        assert compare_waveforms(req.waveform, req.arrays["decoded"], atol=1e-5).within
    found = _verdicts(model, capture, tmp_path)
    for check in JUDGED:
        assert found[check].passed, found[check].message()
    # the harness runs no decoder alone: said, not judged
    assert found[checkids.PARITY_DECODER_ALONE].outcome == "not applicable"


@pytest.mark.parametrize("mutant", ["ref_two_stage@replay", "ref_single_stage@replay"])
def test_mutant_is_caught_through_capture(captures, mutant, tmp_path):
    found = _verdicts(mutant, captures[mutant.split("@")[0]], tmp_path)
    assert not found[checkids.PARITY_END_TO_END].passed
    assert "diverges in the hand-over" in found[checkids.PARITY_END_TO_END].message()
    # the generator's codes still equal the reference's: the divergence lies after it (hand-over / decode)
    assert found[checkids.PARITY_CODES].passed, found[checkids.PARITY_CODES].message()


def test_reference_selects_the_parity_checks_in_pytest_validators(captures, tmp_path):
    """``pytest validators --model ref_two_stage,ref_two_stage@replay --reference CAPTURE -k parity``: the harness
    tier runs the parity checks, the correct model passes them, the mutant fails end to end, results.json has them."""
    capture = captures["ref_two_stage"]
    junit = tmp_path / "junit.xml"
    cmd = [
        sys.executable, "-m", "pytest", str(REPO / "validators"), "-p", "no:cacheprovider", "-q", "-p", "no:xdist",
        "--model", "ref_two_stage,ref_two_stage@replay", "--reference", str(capture.folder), "-k", "parity",
        "--omnitts-out", str(tmp_path / "out"), f"--junitxml={junit}", "-o", "addopts=--import-mode=importlib",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=900)
    outcome = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kind = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        outcome[case.get("name").split("[", 1)[1].rstrip("]")] = kind
    assert outcome == {
        **{f"{c}-ref_two_stage": "passed" for c in JUDGED},
        f"{checkids.PARITY_CODES}-ref_two_stage@replay": "passed",
        f"{checkids.PARITY_END_TO_END}-ref_two_stage@replay": "failure",
        f"{checkids.PARITY_BATCHED}-ref_two_stage@replay": "failure",
        **{f"{checkids.PARITY_DECODER_ALONE}-{m}": "skipped" for m in ("ref_two_stage", "ref_two_stage@replay")},
    }, proc.stdout[-4000:]
    assert proc.returncode == 1
    (run,) = (tmp_path / "out").glob("harness-*")
    results = json.loads((run / "results.json").read_text())["models"]
    assert results["ref_two_stage"]["results"][checkids.PARITY_END_TO_END] == "passed"
    assert results["ref_two_stage@replay"]["metrics"][checkids.PARITY_END_TO_END]["r0"]["where"] == "hand-over"
