"""AR and generation workers of omnitts's CPU OmniPlatform: vLLM-Omni's runners over vLLM's CPU runner.

vLLM-Omni's runners (``GPUARModelRunner``, ``GPUGenerationModelRunner``) extend vLLM's ``GPUModelRunner``;
vLLM's ``CPUModelRunner`` extends the same class. Combining them puts ``CPUModelRunner`` between vLLM-Omni's
classes and ``GPUModelRunner`` in the MRO, so vLLM-Omni's hooks (load_model, execute_model, output
building) run first and reach vLLM's CPU overrides through ``super()``. Construction happens inside vLLM's
CPU wrapper of ``torch.cuda`` (as ``CPUModelRunner.__init__`` does for its own part), because vLLM-Omni's
constructors create streams and events too. The workers are vLLM's ``CPUWorker`` with vLLM-Omni's
``OmniWorkerMixin``; ``init_device`` swaps the CPU runner for the Omni one. Nothing is copied from vLLM-Omni.
This module imports vLLM and vLLM-Omni: it is only imported inside the engine's workers.
"""

from __future__ import annotations

import torch
from vllm.v1.worker import cpu_model_runner
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm_omni.worker.gpu_ar_model_runner import GPUARModelRunner
from vllm_omni.worker.gpu_generation_model_runner import GPUGenerationModelRunner
from vllm_omni.worker.mixins import OmniWorkerMixin


class _CpuOmniRunner:
    """What both Omni runners need on a CPU: construction under vLLM's CPU ``torch.cuda`` wrapper, no device
    properties, synchronous kernels."""

    def __init__(self, *args, **kwargs):
        with cpu_model_runner._torch_cuda_wrapper():
            super().__init__(*args, **kwargs)
        # vLLM's CPU platform captures no graphs and leaves this None; vLLM-Omni's talker-MTP buffers (Qwen3-TTS)
        # are sized by max(max_num_reqs, it).
        if self.compilation_config.max_cudagraph_capture_size is None:
            self.compilation_config.max_cudagraph_capture_size = 0

    def _init_device_properties(self) -> None:
        self.num_sms = None

    def _sync_device(self) -> None:
        return None


class CPUARModelRunner(_CpuOmniRunner, GPUARModelRunner, CPUModelRunner):
    """vLLM-Omni's AR runner (talker / single-stage / native-AR stages) on vLLM's CPU runner."""


class CPUGenerationModelRunner(_CpuOmniRunner, GPUGenerationModelRunner, CPUModelRunner):
    """vLLM-Omni's generation runner (non-AR decoder stages, e.g. code2wav) on vLLM's CPU runner."""


class _CpuOmniWorker(OmniWorkerMixin, CPUWorker):
    model_runner_cls: type

    def init_device(self) -> None:
        super().init_device()
        if getattr(self, "use_v2_model_runner", False):
            self.use_v2_model_runner = False  # vLLM-Omni's hooks live in the v1 runners
        self.model_runner = self.model_runner_cls(self.vllm_config, torch.device("cpu"))


class CPUARWorker(_CpuOmniWorker):
    model_runner_cls = CPUARModelRunner


class CPUGenerationWorker(_CpuOmniWorker):
    model_runner_cls = CPUGenerationModelRunner
