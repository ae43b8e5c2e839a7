"""Reference parity on code nobody here wrote: vLLM-Omni 0.30.0's own Qwen3-TTS against the authors' ``qwen-tts``,
through ``pytest validators --engine offline --checkpoint DIR --reference CAPTURE``.

``omnitts-capture --reference qwen-tts --random-checkpoint`` writes a tiny random CustomVoice checkpoint with
qwen-tts's own classes and captures its greedy float32 outputs in qwen-tts's own cached environment (transformers
4.57.3); the validators then run the same checkpoint through the release's ``qwen3_tts`` in the real offline engine
on CPU (engine environment, transformers 5.14.1), with requests built the way the release's serving adapter builds
them, and the parity verdicts judge: the codes the integration's decoder receives equal the reference's frame by
frame, and the waveforms (alone, batched, and the decoder alone on the reference's codes) are within the float32
tolerance (VALID). A seeded port bug in a copy of the release (the CustomVoice prompt without the codec pad
embedding) fails ``parity.codes`` at frame 0-1 and ``parity.end_to_end`` in the generator (INVALID).
Timings: docs/parity.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from omnitts.validators import checkids

from .conftest import RELEASE
from .test_engine_tier import check_of

pytestmark = [pytest.mark.engine, pytest.mark.slow]
MODEL = "qwen3_tts"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    from omnitts.validators.parity import cli
    from omnitts.validators.parity.capture_file import read_capture

    work = tmp_path_factory.mktemp("parity-capture")
    started = time.monotonic()
    args = ["--reference", "qwen-tts", "--checkpoint", str(work / "ckpt"), "--out", str(work / "cap")]
    cli.capture(cli._parser().parse_args([*args, "--random-checkpoint"]))
    print(f"capture (reference env build included): {time.monotonic() - started:.0f} s")
    return work / "ckpt", work / "cap", read_capture(work / "cap")


def validators(
    tmp_path: Path, tree: Path, ckpt: Path, cap: Path, model: str = MODEL
) -> tuple[subprocess.CompletedProcess, dict, Path]:
    """``pytest validators --engine offline --checkpoint CKPT --reference CAP -k parity``: (the process, check id ->
    junit outcome, the run folder)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    junit = tmp_path / "junit.xml"
    cmd = [
        sys.executable, "-m", "pytest", str(REPO / "validators"), "-p", "no:cacheprovider", "-q", "-p", "no:xdist",
        "--omni-root", str(tree), "--model", model, "--engine", "offline", "--checkpoint", str(ckpt),
        "--reference", str(cap), "-k", "parity", "--omnitts-out", str(tmp_path / "out"), f"--junitxml={junit}",
        "-o", "addopts=--import-mode=importlib",
    ]  # fmt: skip
    started = time.monotonic()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=3600, env=env)
    outcome = {}
    for case in ET.parse(junit).getroot().iter("testcase") if junit.is_file() else []:
        kind = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        outcome[check_of(case.get("name"))] = kind
    print(f"pytest validators --reference on {tree.name}: {time.monotonic() - started:.0f} s, {outcome}")
    runs = sorted((tmp_path / "out").glob("offline-*"))
    assert runs, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc, outcome, runs[-1]


def _results(run: Path) -> dict:
    """The model's entry of the run's results.json (``results``: check id -> outcome, ``metrics``: check id -> ...)."""
    return json.loads((run / "results.json").read_text())["models"][MODEL]


@pytest.fixture(scope="module")
def release_session(tmp_path_factory, engine_python, captured):
    from omnitts.knowledge.releases import pristine_tree

    ckpt, cap, _ = captured
    return validators(tmp_path_factory.mktemp("parity-release"), pristine_tree(RELEASE), ckpt, cap)


def test_release_passes_every_parity_check(release_session):
    proc, outcome, _ = release_session
    assert outcome == dict.fromkeys(checkids.PARITY, "passed"), proc.stdout[-6000:]
    assert proc.returncode == 0, proc.stdout[-6000:]


def test_results_hold_the_parity_numbers(captured, release_session):
    _, _, run = release_session
    capture = captured[2]
    results = _results(run)
    assert {c: results["results"].get(c) for c in checkids.PARITY} == dict.fromkeys(checkids.PARITY, "passed")
    codes, e2e = results["metrics"][checkids.PARITY_CODES], results["metrics"][checkids.PARITY_END_TO_END]
    for req in capture.requests:
        assert codes[req.id]["agreeing_frames"] == codes[req.id]["frames"] == req.codes.shape[0] >= 20
        assert req.codes.shape[1] == 4
        assert e2e[req.id]["max_abs_diff"] <= 1e-5
    checklist = (run / "checklist.md").read_text()
    assert "Stage 0 (AR) implemented and generates correct tokens" in checklist


def test_requests_carry_the_text_to_the_talker(captured, release_session):
    """The prompt placeholder is the release's own estimate: the two texts that differ only at their end give
    different codes through the engine (with a truncated placeholder they gave the same audio), and the float32 run
    reports the release's hard-coded bf16 attributes it followed."""
    _, _, run = release_session
    capture = captured[2]
    parity = run / "engine" / MODEL / "parity"
    result = json.loads((parity / "result.json").read_text())
    with np.load(parity / "engine.npz") as arrays:
        last, other = capture.requests[-1], capture.requests[-2]
        assert last.text[:-5] == other.text[:-5] and last.text != other.text
        assert not np.array_equal(arrays[f"{last.id}/codes"], arrays[f"{other.id}/codes"])
    for req in capture.requests:
        # the release's estimate for CustomVoice with a language: role (3) + codec prefix (6) + the assistant
        # prompt's tokens - 6, i.e. the reference's own prompt ids + 3
        assert result["requests"][req.id]["prompt_len"] == len(req.arrays["t/prompt_ids"]) + 3
    followed = [f for worker in result["install"] for f in worker["followed"]]
    assert any("_embedding_dtype: torch.bfloat16 -> torch.float32" in f for f in followed), followed


def test_seeded_port_bug_fails_parity_where_it_diverges(tmp_path_factory, engine_python, captured):
    from omnitts.knowledge.releases import pristine_tree
    from omnitts.reference_models import upstream_mutants

    ckpt, cap, capture = captured
    bug = upstream_mutants.bug("dropped-pad-embedding")
    tree = upstream_mutants.apply(pristine_tree(RELEASE), tmp_path_factory.mktemp("bug") / "tree", bug)
    proc, outcome, run = validators(tmp_path_factory.mktemp("parity-bug"), tree, ckpt, cap)
    assert proc.returncode == 1, proc.stdout[-6000:]
    assert outcome[checkids.PARITY_CODES] == outcome[checkids.PARITY_END_TO_END] == "failure", outcome
    assert outcome[checkids.PARITY_DECODER_ALONE] == "passed", outcome  # the codec is right: the bug is upstream
    assert f"{len(capture.requests)} of {len(capture.requests)} requests diverge from the reference" in proc.stdout
    metrics = _results(run)["metrics"][checkids.PARITY_CODES]
    diverged = [m for key, m in metrics.items() if key != "memory"]
    assert len(diverged) == len(capture.requests) and max(m["first_divergence"][0] for m in diverged) <= 1, metrics
    assert "diverges in the generator" in proc.stdout, proc.stdout[-6000:]
