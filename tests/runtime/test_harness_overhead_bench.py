"""benchmarks/harness_overhead.py runs on CPU: the recorded model-side calls replay with the arguments the harness
passed (the two-stage model's stage input processor takes keywords only, as the release's chunk transfer adapter
calls it), and the JSON it writes has the ratios the GPU scripts read."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "harness_overhead.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("harness_overhead", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["harness_overhead"] = module
    spec.loader.exec_module(module)
    return module


def test_two_stage_runs_and_writes_its_ratios(bench, tmp_path):
    out = tmp_path / "overhead.json"
    # the exit status is the 5 % target, which a loaded 2-core machine may miss; running at all is the point here
    bench.main(["--models", "ref_two_stage", "--repeats", "1", "--device", "cpu", "--out", str(out)])
    summary = json.loads(out.read_text())
    (row,) = summary["models"]
    assert row["model"] == "ref_two_stage"
    # the stage input processor's calls are among the replayed ones (the call that crashed on keywords)
    assert row["model_calls"] > 0 and row["harness_s"] > 0 and row["bare_loop_s"] > 0 and row["ar_loop_s"] > 0
    assert summary["total_ratio"] == pytest.approx(row["harness_s"] / row["bare_loop_s"], rel=1e-3)


def test_the_replay_calls_the_stage_input_processor_with_its_recorded_keywords(bench):
    seen = []

    def processor(*, transfer_manager, multimodal_output, request, is_finished):
        seen.append((transfer_manager, multimodal_output, request, is_finished))

    bench._replay(
        {},
        [("proc", processor, (), {"transfer_manager": 1, "multimodal_output": 2, "request": 3, "is_finished": True})],
    )
    assert seen == [(1, 2, 3, True)]
