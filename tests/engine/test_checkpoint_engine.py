"""``pytest validators --engine {offline,server} --model NAME --checkpoint DIR [--dummy-weights]`` on the CPU engine
(issue 10 item 3): the engine tier runs on a given model directory instead of building one, and with vLLM's
``load_format="dummy"`` on a directory that has no weights.

The directory is the scaffolded tiny model's, built beforehand by the same builder the engine tier uses
(``EngineEnv.model_dir``) into this test's temporary folder; the model's name is unique to this test, so the engine
tier's own cache of built directories (``OMNITTS_CACHE/engine-models/NAME-*``) must stay untouched: that proves the
session used ``--checkpoint`` and built nothing. Option parsing and the engine arguments: tests/runtime/
test_checkpoint_options.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from omnitts.validators import checkids

from .conftest import RELEASE, scaffold
from .test_engine_tier import EXPECTED, check_of

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
OFFLINE_CHECKS = EXPECTED["offline"]


@pytest.fixture(scope="module")
def prebuilt(tmp_path_factory, engine_python):
    """(tree, model name, its model directory with weights, the same directory without them)."""
    from omnitts.validators.engine.runtime import EngineEnv

    tmp = tmp_path_factory.mktemp("checkpoint")
    name = f"tiny_ckpt_{uuid.uuid4().hex[:8]}"
    tree = scaffold(tmp, "single-stage", name)
    env = EngineEnv.prepare(tree, RELEASE, tmp / "work")
    full = env.model_dir(name, tmp / "model-dir")
    assert sorted(p.name for p in full.glob("*.safetensors")) == ["model.safetensors"]
    bare = tmp / "model-dir-no-weights"
    shutil.copytree(full, bare, ignore=shutil.ignore_patterns("*.safetensors"))
    return tree, name, full, bare


def _validators(
    tmp_path: Path, tree: Path, name: str, *flags: str, tier: str = "offline"
) -> tuple[subprocess.CompletedProcess, dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    junit = tmp_path / "junit.xml"
    cmd = [
        sys.executable, "-m", "pytest", str(REPO / "validators"), "-p", "no:cacheprovider", "-q",
        "--omni-root", str(tree), "--model", name, "--engine", tier, *flags,
        "--omnitts-out", str(tmp_path / "out"), f"--junitxml={junit}", "-o", "addopts=--import-mode=importlib",
    ]  # fmt: skip
    started = time.monotonic()
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=1200, env=env)
    outcome = {}
    for case in ET.parse(junit).getroot().iter("testcase") if junit.is_file() else []:
        kind = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        outcome[check_of(case.get("name"))] = kind
    print(f"{' '.join(flags)}: {time.monotonic() - started:.0f} s, {outcome}")
    return proc, outcome


def _engine_config(tmp_path: Path, name: str, log: str = "offline/offline.log") -> tuple[str, str]:
    """(model, load_format) of the engine vLLM started, from its own log line ``Initializing a V1 LLM engine``."""
    logs = list(tmp_path.glob(f"out/*/engine/{name}/{log}"))  # the run folder keeps the engine's work folder
    assert len(logs) == 1, logs
    found = re.search(r"with config: model='([^']+)'.*?load_format=(\w+)", logs[0].read_text())
    assert found, f"no engine config line in {logs[0]}"
    return found.group(1), found.group(2)


def _cached_dirs(name: str) -> list[Path]:
    from omnitts.knowledge.releases import cache_root

    return sorted((cache_root() / "engine-models").glob(f"{name}-*"))


def test_checkpoint_with_weights_passes_every_offline_check(prebuilt, tmp_path):
    tree, name, full, _ = prebuilt
    proc, outcome = _validators(tmp_path, tree, name, "--checkpoint", str(full))
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert set(outcome) == OFFLINE_CHECKS and set(outcome.values()) == {"passed"}, outcome
    assert _cached_dirs(name) == [], "the engine tier built a model directory although --checkpoint was given"
    assert _engine_config(tmp_path, name) == (str(full), "auto")


def test_checkpoint_without_weights_runs_with_dummy_weights(prebuilt, tmp_path):
    tree, name, _, bare = prebuilt
    # without --dummy-weights: refused before any engine starts
    refused, _ = _validators(tmp_path / "refused", tree, name, "--checkpoint", str(bare))
    assert refused.returncode == 4 and "pass --dummy-weights" in refused.stderr, refused.stderr
    proc, outcome = _validators(tmp_path, tree, name, "--checkpoint", str(bare), "--dummy-weights")
    assert set(outcome) == OFFLINE_CHECKS, outcome
    assert outcome == DUMMY_OUTCOME and proc.returncode == 1, proc.stdout[-6000:]
    assert DUMMY_DISTINCT_FAILURE in proc.stdout, proc.stdout[-6000:]
    assert _cached_dirs(name) == []
    assert _engine_config(tmp_path, name) == (str(bare), "dummy")


def test_checkpoint_without_weights_serves_with_dummy_weights(prebuilt, tmp_path):
    """The server tier on the same directory: ``vllm-omni serve DIR --load-format dummy``; every server check passes
    (its texts differ more than the offline pair that dummy weights cannot tell apart)."""
    tree, name, _, bare = prebuilt
    proc, outcome = _validators(tmp_path, tree, name, "--checkpoint", str(bare), "--dummy-weights", tier="server")
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert set(outcome) == EXPECTED["server"] and set(outcome.values()) == {"passed"}, outcome
    assert _engine_config(tmp_path, name, "server.log") == (str(bare), "dummy")


# Measured on the 0.30.0 CPU engine (docs/engine.md): vLLM's dummy loader draws every weight from U(-1e-3, 1e-3), so
# the tiny model's audio hardly depends on the text: the two texts that differ only in their last digits give the
# same audio, and the distinct-texts check fails on exactly them. Every other offline check passes.
DUMMY_OUTCOME = {**dict.fromkeys(OFFLINE_CHECKS, "passed"), checkids.I4_CONCURRENCY: "failure"}
DUMMY_DISTINCT_FAILURE = (
    "'Four: the last text, with digits 0123.' and 'Four: the last text, with digits 4567.' give the same audio"
)


# -- a model of the tree not shaped like the scaffold's: 0.30.0's own Qwen3-TTS ---------------------------------------

QWEN3_REQUEST_INFO = {"task_type": "CustomVoice", "speaker": "tiny", "language": "english", "max_new_tokens": 24}
# Measured (docs/engine.md): the checks that pass, and the three that fail with these messages.
QWEN3_OUTCOME = {
    **dict.fromkeys(OFFLINE_CHECKS, "passed"),
    # dummy weights: every text gives the same audio (as tests/engine/test_upstream_models.py's strict xfail)
    checkids.I4_CONCURRENCY: "failure",
    # a pristine release tree has no examples/ folder
    checkids.I2_CONSUMER_FORMS: "failure",
    # the first output Omni yields for the streamed request is already finished (likely async_chunk off in the tiny
    # directory's deploy config: only code2wav's final output reaches the caller), so nothing is aborted mid-request
    checkids.I5_STATE_FREED: "failure",
}
QWEN3_MESSAGES = (
    "'Hello there.' and 'A second, longer sentence for the engine tier.' give the same audio",
    "no offline example in the tree for qwen3_tts",
    "the request ended before it was aborted",
)


def test_checkpoint_runs_a_model_of_the_tree_not_shaped_like_the_scaffold(tmp_path, engine_python):
    """``--model qwen3_tts --checkpoint DIR --dummy-weights`` on the pristine 0.30.0 tree: the directory is
    ``validators/engine/upstream.py``'s tiny Qwen3-TTS (config + tokenizer, no weights, its own deploy config)."""
    from omnitts.knowledge.releases import pristine_tree
    from omnitts.validators.engine.runtime import EngineEnv

    tree = pristine_tree(RELEASE)
    env = EngineEnv.prepare(tree, RELEASE, tmp_path / "work")
    model_dir = tmp_path / "qwen3-tiny"
    build = ["-m", "omnitts.validators.engine.upstream", "build", "--tree", str(tree), "--model", "qwen3_tts"]
    proc = env.run([*build, "--out", str(model_dir)], timeout=300, log=tmp_path / "build.log")
    assert proc.returncode == 0, (tmp_path / "build.log").read_text()[-3000:]
    assert not list(model_dir.glob("*.safetensors"))
    info = json.dumps(QWEN3_REQUEST_INFO)
    flags = ["--checkpoint", str(model_dir), "--dummy-weights", "--omnitts-request-info", info]
    proc, outcome = _validators(tmp_path / "session", tree, "qwen3_tts", *flags)
    assert outcome == QWEN3_OUTCOME and proc.returncode == 1, proc.stdout[-6000:]
    for message in QWEN3_MESSAGES:
        assert message in proc.stdout, (message, proc.stdout[-6000:])
    assert _engine_config(tmp_path / "session", "qwen3_tts") == (str(model_dir), "dummy")
    result = json.loads(next((tmp_path / "session").glob("out/*/engine/qwen3_tts/offline/result.json")).read_text())
    assert result["requests_from"] == "omnitts+request_info"
