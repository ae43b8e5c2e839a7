"""Scaffold bug (issue 10, item 3): the generated async-chunk stage input processor must return what the release's
chunk transfer adapter reads. vLLM-Omni 0.22+ (``distributed/omni_connectors/transfer_adapter/
chunk_transfer_adapter.py``) takes an ``OmniPayloadStruct`` and sets ``payload_data.meta`` on it; the scaffold
returned a dict, so every window failed there and the two-stage model gave no audio through the 0.30 engine.

This runs the generated processor in the engine environment (msgspec installed) against the release's own
``vllm_omni/data_entry_keys.py``, called as the adapter calls it (keywords read from the tree's adapter), and
validates every window with the release's schema check (``validate_payload(to_dict(...))``). Seconds, no engine.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from omnitts.knowledge.runner import chunk_processor_kwargs

from .conftest import scaffold

pytestmark = pytest.mark.engine

SCRIPT = r"""
import importlib.util, json, sys
from collections import defaultdict
from types import SimpleNamespace

import torch

root, name, payload_kwarg = sys.argv[1:4]


def load(module_name, path):
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


keys = load("vllm_omni.data_entry_keys", f"{root}/vllm_omni/data_entry_keys.py")
proc = load("processor", f"{root}/vllm_omni/model_executor/stage_input_processors/{name}.py")
extra = {"codec_chunk_frames": 2, "codec_left_context_frames": 1}
tm = SimpleNamespace(code_prompt_token_ids=defaultdict(list), connector=SimpleNamespace(config={"extra": extra}))
request = SimpleNamespace(external_req_id="r", is_finished=lambda: False)
windows = []
for step in range(5):  # five frames [1, K=2]; the last call is the request's finish
    frame = torch.tensor([[step, step + 10]])
    kwargs = {"transfer_manager": tm, payload_kwarg: {"codes": {"audio": frame}}, "request": request}
    out = proc.talker2code2wav_async_chunk(**kwargs, is_finished=step == 4)
    if out is None:
        continue
    if not isinstance(out, keys.OmniPayloadStruct):
        print(json.dumps({"type": type(out).__name__}))
        sys.exit(0)
    keys.validate_payload(keys.to_dict(out), context="generated processor")
    out.meta.finished = out.meta.finished  # what the adapter does next (attribute access)
    windows.append({"codes": out.codes.audio.tolist(), "left": out.meta.left_context_size,
                    "finished": bool(out.meta.finished)})
print(json.dumps({"type": "OmniPayloadStruct", "windows": windows}))
"""


def test_generated_processor_returns_the_releases_payload_struct(tmp_path, engine_python):
    tree = scaffold(tmp_path, "two-stage", "tiny_proc")
    payload = next(k for k in chunk_processor_kwargs(tree) if k.endswith("_output"))
    proc = subprocess.run(
        [str(engine_python), "-c", SCRIPT, str(tree), "tiny_proc", payload],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["type"] == "OmniPayloadStruct", f"the generated processor returned a {result['type']}"
    # windows of 2 new frames with 1 frame of left context, codebook-major; the rest at finish
    assert result["windows"] == [
        {"codes": [0, 1, 10, 11], "left": 0, "finished": False},
        {"codes": [1, 2, 3, 11, 12, 13], "left": 1, "finished": False},
        {"codes": [3, 4, 13, 14], "left": 1, "finished": True},
    ]
