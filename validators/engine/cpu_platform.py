"""omnitts's CPU OmniPlatform: lets vLLM-Omni (0.30+) run on a machine without an accelerator.

vLLM-Omni ships platforms for CUDA, ROCm, NPU, XPU and MUSA only; on a CPU-only machine ``Omni(...)`` fails
in ``UnspecifiedOmniPlatform``. vLLM-Omni loads extra platforms from the entry-point group
``vllm_omni.platform_plugins`` (declared in omnitts's pyproject.toml); plugins win over the built-in ones, so
:func:`activate` answers only when none of the built-in detectors finds an accelerator and vLLM itself runs
on its CPU platform: installing omnitts never changes the platform on a GPU machine.

The platform is vLLM's ``CpuPlatform`` plus vLLM-Omni's ``OmniPlatform`` interface; its workers
(``cpu_workers``) reuse vLLM-Omni's AR and generation runners over vLLM's CPU runner.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

PLATFORM = "omnitts.validators.engine.cpu_platform.CpuOmniPlatform"


def _accelerator_present() -> str | None:
    """The name of an accelerator that vLLM-Omni (or torch) sees, None on a CPU-only machine."""
    from vllm_omni.platforms import builtin_omni_platform_plugins

    for name, detect in builtin_omni_platform_plugins.items():
        try:
            if detect() is not None:
                return name
        except Exception:  # a detector that fails finds nothing, as in vLLM-Omni's own resolution
            continue
    import torch

    if torch.cuda.is_available():
        return "cuda"
    for backend in ("xpu", "npu", "mps"):
        module = getattr(torch, backend, None) or getattr(torch.backends, backend, None)
        try:
            if module is not None and module.is_available():
                return backend
        except Exception:
            continue
    return None


def activate() -> str | None:
    """Entry point of ``vllm_omni.platform_plugins``: the platform's qualname on a CPU-only machine, else None."""
    try:
        accelerator = _accelerator_present()
        if accelerator is not None:
            logger.debug("omnitts CPU OmniPlatform stays off: %s present", accelerator)
            return None
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            logger.debug("omnitts CPU OmniPlatform stays off: vLLM runs on %s", current_platform.device_type)
            return None
    except Exception:  # never break vLLM-Omni's platform resolution
        logger.debug("omnitts CPU OmniPlatform detection failed", exc_info=True)
        return None
    return PLATFORM


def _platform_class():
    import torch
    from vllm.platforms.cpu import CpuPlatform
    from vllm_omni.platforms.interface import OmniPlatform, OmniPlatformEnum

    class CpuOmniPlatform(OmniPlatform, CpuPlatform):
        """vLLM's CPU platform with vLLM-Omni's platform interface (an out-of-tree Omni platform)."""

        _omni_enum = OmniPlatformEnum.OOT

        @classmethod
        def get_omni_ar_worker_cls(cls) -> str:
            return "omnitts.validators.engine.cpu_workers.CPUARWorker"

        @classmethod
        def get_omni_generation_worker_cls(cls) -> str:
            return "omnitts.validators.engine.cpu_workers.CPUGenerationWorker"

        @classmethod
        def get_default_stage_config_path(cls) -> str:
            return "vllm_omni/deploy"  # the deploy configs are device-neutral; CUDA uses the same folder

        @classmethod
        def get_diffusion_attn_backend_cls(cls, selected_backend, head_size, allow_trtllm_default=False) -> str:
            from vllm_omni.diffusion.attention.backends.registry import DiffusionAttentionBackendEnum

            if selected_backend is not None:
                cls.validate_diffusion_attn_backend(selected_backend.upper())
                return DiffusionAttentionBackendEnum[selected_backend.upper()].get_path()
            return DiffusionAttentionBackendEnum.TORCH_SDPA.get_path()

        @classmethod
        def supports_torch_inductor(cls) -> bool:
            return False  # the engine tier runs eager: it checks behaviour, not compiled speed

        @classmethod
        def supports_talker_mtp_graph_capture(cls) -> bool:
            return False

        @classmethod
        def get_torch_device(cls, local_rank: int | None = None) -> torch.device:
            return torch.device("cpu")

        @classmethod
        def get_device_count(cls) -> int:
            return 1

        @classmethod
        def get_device_version(cls) -> str | None:
            return None

        @classmethod
        def synchronize(cls) -> None:
            return None  # CPU kernels are synchronous

        @classmethod
        def get_free_memory(cls, device: torch.device | None = None) -> int:
            return cls.get_device_memory(device)[0]

        @classmethod
        def get_device_memory(cls, device: torch.device | None = None) -> tuple[int, int]:
            import psutil

            memory = psutil.virtual_memory()
            return memory.available, memory.total

    CpuOmniPlatform.__module__ = __name__
    CpuOmniPlatform.__qualname__ = "CpuOmniPlatform"
    return CpuOmniPlatform


def __getattr__(name: str):
    # The class needs vLLM and vLLM-Omni: build it on first use, so that importing this module (the entry point)
    # stays cheap and works where neither is installed.
    if name == "CpuOmniPlatform":
        cls = _platform_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
