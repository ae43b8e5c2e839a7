"""Issue 10 item 7: vLLM-Omni 0.30.0's OWN TTS models (code nobody here wrote) through the engine tier.

Each model's tiny directory is built by code (``validators/engine/upstream.py``: the tree's own config classes with
tiny dimensions, a byte-level tokenizer, no weights) and run by the tree's offline ``Omni`` with vLLM's
``load_format="dummy"``, through omnitts's CPU platform. The checks are the engine tier's offline ones with the same
tolerances: I1 (sample rate and duration of every solo output), I4 (each batched request equals its solo run;
distinct texts give distinct audio). Results and timings: docs/upstream_models.md.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from omnitts.validators.checks.test_engine_tier import _distinct, _same

from .conftest import RELEASE

pytestmark = pytest.mark.engine

TEXTS = ["Hello there.", "A second, longer sentence for the engine.", "Numbers: 1 2 3.", "Short."]
BATCHES = [TEXTS, list(reversed(TEXTS)) + [TEXTS[0]]]
SAMPLE_RATE = {"qwen3_tts": 24000}


@pytest.fixture(scope="module")
def engine_env(tmp_path_factory, engine_python):
    from omnitts.knowledge.releases import pristine_tree
    from omnitts.validators.engine.runtime import EngineEnv

    return EngineEnv.prepare(pristine_tree(RELEASE), RELEASE, tmp_path_factory.mktemp("upstream"))


@pytest.fixture(scope="module", params=sorted(SAMPLE_RATE))
def upstream_run(request, engine_env, tmp_path_factory):
    """One offline engine run per upstream model: solo, then the batches; (model, result, out dir)."""
    model = request.param
    tmp = tmp_path_factory.mktemp(model)
    model_dir = tmp / f"{model}-tiny"
    build = [
        "-m", "omnitts.validators.engine.upstream", "build", "--tree", str(engine_env.tree), "--model", model,
        "--out", str(model_dir),
    ]  # fmt: skip
    proc = engine_env.run(build, timeout=300, log=tmp / "build.log")
    assert proc.returncode == 0, (tmp / "build.log").read_text()[-3000:]
    out = tmp / "offline"
    out.mkdir()
    (out / "plan.json").write_text(json.dumps({"texts": TEXTS, "batches": BATCHES}))
    started = time.monotonic()
    drive = [
        "-m", "omnitts.validators.engine.upstream", "offline", "--model-dir", str(model_dir), "--plan",
        str(out / "plan.json"), "--out", str(out),
    ]  # fmt: skip
    proc = engine_env.run(drive, timeout=900, log=out / "offline.log")
    took = time.monotonic() - started
    result = json.loads((out / "result.json").read_text()) if (out / "result.json").is_file() else {}
    log_tail = "\n".join((out / "offline.log").read_text().splitlines()[-40:])
    assert proc.returncode == 0 and "error" not in result, f"{model}: {result.get('traceback', '')}\n{log_tail}"
    print(f"{model}: startup {result['startup_s']} s, engine run {took:.0f} s, {json.dumps(result['scenarios'])}")
    return model, result, out


def _solo(result: dict, out: Path) -> dict[str, np.ndarray]:
    return {r["text"]: np.load(out / "solo" / f"{i}.npy") for i, r in enumerate(result["scenarios"]["solo"]["rows"])}


def test_upstream_model_offline_i1_and_batch_equals_solo(upstream_run):
    model, result, out = upstream_run
    rows = result["scenarios"]["solo"]["rows"]
    # I1: sample rate and duration of every solo output.
    bad = [r for r in rows if r["sr"] != SAMPLE_RATE[model] or not r["seconds"] or not 0 < r["seconds"] < 60]
    assert not bad, f"I1 ({model}): {bad}"
    solo = _solo(result, out)
    # I4: every batched request equals its text's solo run.
    problems, checked = [], 0
    for name, scenario in result["scenarios"].items():
        if name == "solo":
            continue
        for i, row in enumerate(scenario["rows"]):
            same, how = _same(np.load(out / name / f"{i}.npy"), solo[row["text"]])
            checked += 1
            if not same:
                problems.append(f"{name}[{i}] {row['text']!r}: {how}")
    assert checked == sum(len(b) for b in BATCHES)
    assert not problems, f"I4 batch != solo ({model}): " + "; ".join(problems)


@pytest.mark.xfail(
    strict=True,
    reason="vLLM's load_format=dummy draws every weight from U(-1e-3, 1e-3): the tiny Qwen3-TTS's greedy codes do "
    "not depend on the text, so all texts give the same audio; needs random weights at a trained scale "
    "(docs/upstream_models.md). Strict: passes -> XPASS fails, and this marker must go.",
)
def test_upstream_model_offline_text_reaches_the_model(upstream_run):
    model, result, out = upstream_run
    same = _distinct(_solo(result, out))
    assert not same, f"I4 ({model}): " + "; ".join(same)
