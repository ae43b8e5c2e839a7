"""The engine tier's in-worker checks (I5, I3 through ``worker_extension_cls`` + ``collective_rpc``) catch seeded
bugs in the scaffolded single-stage model run by the tree's own engine.

One tree carries three bugs: the model keeps a per-request dict entry that nothing removes (I5, seen after finish),
its ``on_requests_finished`` closes a request's generator but keeps its entry, which only a request that does not
run to its last chunk leaves behind (I5, seen after abort and over the 3-token sequential requests), and its frame
loop reads a stop flag with ``.item()`` (I3). The correct model passes the same checks in ``test_engine_tier.py``.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from omnitts.validators import checkids

from .conftest import scaffold
from .test_engine_tier import check_of

pytestmark = pytest.mark.engine

REPO = Path(__file__).resolve().parents[2]
MODEL = "tiny_single_stage"

# (old, new) edits of the scaffolded modeling file; each old text must be there exactly once
SEEDED = (
    (  # I5: a per-request dict entry, written on every request's prefill and never dropped
        "        self._pending: list[tuple[str, int]] = []\n",
        "        self._pending: list[tuple[str, int]] = []\n        self._prompt_lengths: dict[str, int] = {}\n",
    ),
    (
        "        self._pending.append((request_key(info), input_ids.shape[0]))\n",
        "        self._pending.append((request_key(info), input_ids.shape[0]))\n"
        "        self._prompt_lengths[request_key(info)] = input_ids.shape[0]\n",
    ),
    (  # I5 on abort: the finish hook keeps the entry (requests that reach their last chunk drop it in forward)
        "            stream = self._stream_gens.pop(str(req_id), None)\n",
        "            stream = self._stream_gens.get(str(req_id))\n",
    ),
    (  # I3: a host sync in every frame of the AR loop
        "            done = done | stop\n",
        "            done = done | stop\n            if stop.item():\n                pass\n",
    ),
)

HOLDER = "stage0:TinySingleStageForGeneration."
# check -> what its failure must say, per tier
EXPECTED_FAILURES = {
    "offline": {
        checkids.I5_STATE_FREED: (
            f"after finish (offline): {HOLDER}_prompt_lengths still holds",
            f"after abort (offline): {HOLDER}_stream_gens still holds",
        ),
        checkids.I5_NO_GROWTH: (f"{HOLDER}_prompt_lengths: ", f"{HOLDER}_stream_gens: "),
        checkids.I5_ABORT_RECOVERY: (f"aborts: {HOLDER}_prompt_lengths still holds", f"aborts: {HOLDER}_stream_gens"),
        checkids.I3_HOST_SYNCS: ("in generate_chunk: if stop.item():",),
    },
    "server": {
        checkids.I5_STATE_FREED: (
            f"after disconnect (server): {HOLDER}_prompt_lengths still holds",
            f"{HOLDER}_stream_gens still holds",
        ),
        # The server's max_new_tokens is the model's own cap (the adapter passes it in additional_information):
        # each request reaches its last chunk, which drops its _stream_gens entry; only _prompt_lengths grows.
        checkids.I5_NO_GROWTH: (f"{HOLDER}_prompt_lengths: ",),
        checkids.I5_ABORT_RECOVERY: (f"aborts: {HOLDER}_prompt_lengths still holds",),
        checkids.I3_HOST_SYNCS: ("in generate_chunk: if stop.item():",),
    },
}


@pytest.fixture(scope="module")
def seeded_tree(tmp_path_factory, engine_python) -> Path:
    tree = scaffold(tmp_path_factory.mktemp("seeded"), "single-stage", MODEL)
    modeling = tree / "vllm_omni" / "model_executor" / "models" / MODEL / f"modeling_{MODEL}.py"
    text = modeling.read_text()
    for old, new in SEEDED:
        assert text.count(old) == 1, f"the scaffold changed: {old!r} not found once in {modeling.name}"
        text = text.replace(old, new)
    modeling.write_text(text)
    return tree


@pytest.mark.parametrize("tier", ["offline", "server"])
def test_in_worker_checks_catch_seeded_bugs(seeded_tree, tmp_path, tier):
    junit = tmp_path / "junit.xml"
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
            str(seeded_tree),
            "--model",
            MODEL,
            "--engine",
            tier,
            "-k",
            "i5 or i3",
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
    assert junit.is_file(), proc.stdout[-4000:] + proc.stderr[-2000:]
    outcome, messages = {}, {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = check_of(case.get("name"))
        failed = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        outcome[name] = failed.tag if failed is not None else "passed"
        messages[name] = (failed.get("message", "") + (failed.text or "")) if failed is not None else ""
    print(f"seeded {tier}: {outcome}")
    assert set(outcome) == set(EXPECTED_FAILURES[tier]), f"selected: {sorted(outcome)}\n{proc.stdout[-3000:]}"
    for name, needles in EXPECTED_FAILURES[tier].items():
        tail = proc.stdout[-3000:]
        assert outcome[name] == "failure", f"{name} did not catch the seeded bug: {outcome[name]}\n{tail}"
        for needle in needles:
            assert needle in messages[name], f"{name} does not name the bug ({needle!r}):\n{messages[name][:3000]}"
