"""omnitts's CPU OmniPlatform in the real vLLM-Omni: active on this CPU-only machine, never on a GPU machine."""

from __future__ import annotations

import os
import subprocess

import pytest

from omnitts.knowledge.engine import ENGINE_ENV

pytestmark = pytest.mark.engine

PROBE = r"""
import sys, json
import torch
fake = sys.argv[1]
if fake == "cuda-torch":  # torch reports a CUDA device (vLLM-Omni's own detector would use NVML)
    torch.cuda.is_available = lambda: True
import vllm_omni.platforms as platforms
if fake == "cuda-nvml":  # vLLM-Omni's built-in CUDA detector finds a GPU
    platforms.builtin_omni_platform_plugins["cuda"] = lambda: "vllm_omni.platforms.cuda.platform.CudaOmniPlatform"
print(json.dumps({"resolved": platforms.resolve_current_omni_platform_cls_qualname()}))
"""


def _resolve(engine_python, engine_overlay, fake: str) -> str:
    import json

    env = dict(os.environ, PYTHONPATH=str(engine_overlay), **ENGINE_ENV)
    proc = subprocess.run([str(engine_python), "-c", PROBE, fake], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["resolved"]


def test_active_on_a_cpu_only_machine(engine_python, engine_overlay):
    assert _resolve(engine_python, engine_overlay, "none") == "omnitts.validators.engine.cpu_platform.CpuOmniPlatform"


@pytest.mark.parametrize("fake", ["cuda-nvml", "cuda-torch"])
def test_never_changes_the_platform_on_a_gpu_machine(engine_python, engine_overlay, fake):
    resolved = _resolve(engine_python, engine_overlay, fake)
    assert "omnitts" not in resolved, f"omnitts's CPU platform activated with a GPU present ({fake}): {resolved}"
    if fake == "cuda-nvml":
        assert resolved == "vllm_omni.platforms.cuda.platform.CudaOmniPlatform"


def test_workers_put_the_cpu_runner_under_vllm_omni_runners(engine_python, engine_overlay):
    """The MRO the facts page requires: vLLM-Omni's classes, then vLLM's CPUModelRunner, then GPUModelRunner."""
    probe = (
        "from omnitts.validators.engine.cpu_workers import CPUARModelRunner as R, CPUARWorker as W\n"
        "from omnitts.validators.engine import cpu_workers as cw\n"
        "names = [c.__name__ for c in cw.CPUGenerationModelRunner.__mro__] + ['|'] + [c.__name__ for c in R.__mro__]\n"
        "names += ['|'] + [c.__name__ for c in W.__mro__]\n"
        "print(' '.join(names))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(engine_overlay), **ENGINE_ENV)
    proc = subprocess.run([str(engine_python), "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    gen, ar, worker = (part.split() for part in proc.stdout.strip().splitlines()[-1].split("|"))
    for mro, omni in ((ar, "GPUARModelRunner"), (gen, "GPUGenerationModelRunner")):
        assert mro.index(omni) < mro.index("CPUModelRunner") < mro.index("GPUModelRunner"), mro
    assert worker.index("OmniWorkerMixin") < worker.index("CPUWorker"), worker
