"""Scaffold bug 3 (issue 10): the generated model must build under vLLM's default-device context.

vLLM constructs a model inside ``with torch.device(<device>)``; on a GPU every factory call without an explicit
``device`` lands on CUDA, and CUDA's ``randn`` refuses a CPU generator ("Expected a 'cuda' device type for
generator but found 'cpu'"). This machine has no GPU, so the test replays that context with a torch function
mode that applies the same defaulting rule as ``torch.utils._device.DeviceContext`` and raises CUDA's error
where a CPU generator meets a defaulted device. The reference models are the committed renders of the pattern
templates (tests/reference_models/test_drift.py keeps them equal), so this tests what the scaffold generates.
"""

from __future__ import annotations

import importlib

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

from omnitts.reference_models.render_references import PATTERNS

CLASSES = {
    "ref_single_stage": [("modeling_ref_single_stage", "RefSingleStageForGeneration")],
    "ref_two_stage": [
        ("ref_two_stage_talker", "RefTwoStageTalkerForConditionalGeneration"),
        ("ref_two_stage_code2wav", "RefTwoStageCode2Wav"),
    ],
    "ref_native_ar": [("modeling_ref_native_ar", "RefNativeArForConditionalGeneration")],
}


class CudaDefaultDevice(TorchFunctionMode):
    """``with torch.device("cuda")`` as CUDA would treat generators, on a machine without CUDA: factory calls
    without a ``device`` are defaulted (recorded, run on the CPU), and a CPU generator in such a call raises."""

    def __init__(self) -> None:
        super().__init__()
        self.defaulted: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _device_constructors() and kwargs.get("device") is None:
            generator = kwargs.get("generator")
            if generator is not None and generator.device.type != "cuda":
                raise RuntimeError(f"Expected a 'cuda' device type for generator but found '{generator.device.type}'")
            self.defaulted.append(getattr(func, "__name__", str(func)))
        return func(*args, **kwargs)


def _build(name: str, module: str, cls_name: str) -> torch.nn.Module:
    base = f"omnitts.reference_models.{name}.models.{name}"
    config_module = importlib.import_module(f"{base}.configuration_{name}")
    camel = "".join(part.title() for part in name.split("_"))
    config_cls = getattr(config_module, f"{camel}Config")
    cls = getattr(importlib.import_module(f"{base}.{module}"), cls_name)
    return cls(config=config_cls())


def test_the_replayed_context_catches_a_cpu_generator():
    """The check itself: the bug as the old template wrote it raises under the replayed context."""
    generator = torch.Generator().manual_seed(0)
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator"), CudaDefaultDevice():
        torch.randn((2, 3), generator=generator)
    with CudaDefaultDevice():
        torch.randn((2, 3), generator=generator, device="cpu")


@pytest.mark.parametrize("name", list(PATTERNS))
def test_generated_model_builds_under_cuda_default_device(name):
    for module, cls_name in CLASSES[name]:
        reference = _build(name, module, cls_name)
        with CudaDefaultDevice():
            model = _build(name, module, cls_name)
        # Same seeded weights as a build outside the context: the draws really are the CPU draws.
        for (key, ours), (_, theirs) in zip(model.state_dict().items(), reference.state_dict().items(), strict=True):
            assert torch.equal(ours, theirs), f"{name}.{cls_name}: {key} differs under the default-device context"


@pytest.mark.parametrize("name", list(PATTERNS))
def test_every_tensor_of_the_generated_model_lives_where_it_was_built(name):
    """vLLM builds the model under ``with torch.device(<device>)`` and loads only the weights: nothing moves a
    non-persistent buffer made on the CPU afterwards. Found on an H200 (issue 10): the native-ar flow head's
    ``noise`` buffer stayed on the CPU, and its first CUDA ``frame_idx`` index raised "indices should be either on
    cpu or on the same device as the indexed tensor". ``meta`` stands in for CUDA here: every parameter and buffer
    must end up on the context's device."""
    for module, cls_name in CLASSES[name]:
        with torch.device("meta"):
            model = _build(name, module, cls_name)
        stray = [
            f"{key} on {tensor.device}"
            for key, tensor in [*model.named_parameters(), *model.named_buffers()]
            if tensor.device.type != "meta"
        ]
        assert not stray, f"{name}.{cls_name}: tensors left off the build device: {stray}"
