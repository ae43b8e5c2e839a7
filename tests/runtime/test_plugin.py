"""End to end: `pytest validators --model ...` in subprocesses (xdist, mutants, hangs, fail-closed static)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOYS = str(Path(__file__).with_name("toys.py"))


def _pytest(*args, cwd=REPO, pre: str = "pass") -> subprocess.CompletedProcess:
    code = f"import sys, pytest; {pre}; sys.exit(pytest.main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_list_models_exits_zero():
    from omnitts.validators.runtime.loaders import list_model_names

    names = list_model_names()
    if not names:
        pytest.skip("no catalog")
    proc = _pytest("--list-models")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == names


def test_checks_need_a_model():
    proc = _pytest("validators", "-q")
    assert proc.returncode != 0 and "--model" in (proc.stdout + proc.stderr)


def test_toys_pass_mutants_fail_under_xdist(tmp_path):
    models = [
        f"{TOYS}:two_stage",
        f"{TOYS}:single_stage",
        f"{TOYS}:two_stage@no_context",
        f"{TOYS}:single_stage@shared",
        f"{TOYS}:two_stage@leak",
        f"{TOYS}:two_stage@sync",
        f"{TOYS}:single_stage@replay",
        f"{TOYS}:single_stage@raise",
        f"{TOYS}:single_stage@hang",
    ]
    proc = _pytest(
        "validators",
        "--model",
        ",".join(models),
        "-n",
        "2",
        "-q",
        "--omnitts-out",
        str(tmp_path),
        "--check-timeout",
        "6",
        "-k",
        "not static and not graph_breaks",
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    res = json.loads((tmp_path / "results.json").read_text())["models"]
    failed = {m.split(":", 1)[1]: {c for c, s in r["results"].items() if s == "failed"} for m, r in res.items()}
    assert failed["two_stage"] == set() and failed["single_stage"] == set()
    assert "chunk.boundaries" in failed["two_stage@no_context"]
    assert "i4.concurrency" in failed["single_stage@shared"]
    assert "i5.state_freed" in failed["two_stage@leak"]
    assert failed["two_stage@sync"] == {"i3.host_syncs"}
    assert "i1.declared_semantics" in failed["single_stage@replay"]
    raised = res[f"{TOYS}:single_stage@raise"]["failures"]
    assert any("toy bug: forward exploded" in m and "model traceback" in m for m in raised.values())
    hung = res[f"{TOYS}:single_stage@hang"]["failures"]
    assert any("deadline" in m and "while True" in m for m in hung.values())
    # what a person sees: WAVs named in the messages, the checklist as Markdown and JSON
    assert list((tmp_path / "wav").rglob("*.wav"))
    md = (tmp_path / "checklist.md").read_text()
    assert "[x] I1:" in md and "Phase 4: Async Chunk" in md
    assert "omnitts integration checklist" in proc.stdout  # compact form: one line per model when > 3 models
    sync_msg = res[f"{TOYS}:two_stage@sync"]["failures"]["i3.host_syncs"]
    assert "toys.py" in sync_msg and ".item()" in sync_msg


def test_static_check_fails_closed_without_the_static_module(tmp_path):
    proc = _pytest(
        "validators",
        "--model",
        f"{TOYS}:single_stage",
        "-q",
        "-k",
        "static",
        "--omnitts-out",
        str(tmp_path),
        pre="sys.modules['omnitts.validators.static.api'] = None",
    )
    assert proc.returncode == 1
    assert "fail closed" in proc.stdout


def test_omnitts_validate_from_another_directory(tmp_path):
    from omnitts.validators import plugin

    code = (
        "import sys; from omnitts.validators.plugin import run_from_anywhere; sys.exit(run_from_anywhere(sys.argv[1:]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "--model", f"{TOYS}:single_stage", "-q", "-k", "i2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert (tmp_path / "omnitts-out" / "checklist.md").is_file()
    assert plugin.CHECK_MARK == "omnitts_check"
