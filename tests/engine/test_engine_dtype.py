"""Scaffold bug (issue 10 item 3): the generated models must run in the engine's dtype (native-AR did not).

vLLM builds the model under ``set_default_torch_dtype(model_config.dtype)``, and its ``dtype="auto"`` loads a
float32 checkpoint (the scaffold's tiny model) in bfloat16. The native-AR side computation concatenated its
float32 timestep embedding with the bfloat16 hidden state, so the flow head's first ``Linear`` met a float32 input
and bfloat16 weights: ``RuntimeError: mat1 and mat2 must have the same dtype`` in ``postprocess``, which killed the
engine core (``OmniEngineDeadError``) on the CPU engine tier and on the H200 alike. The harness tier builds models
in float32 and never saw it. This test builds the generated model (the committed render of the template,
tests/reference_models/test_drift.py keeps them equal) as vLLM does, under a bfloat16 default dtype, and serves
concurrent requests through the harness's runners; every pattern, so none regresses.
"""

from __future__ import annotations

import pytest
import torch

from omnitts.reference_models.catalog import get_subject
from omnitts.reference_models.render_references import PATTERNS

TEXTS = ["hello world", "hi"]


def _build_in(subject, dtype: torch.dtype) -> tuple[torch.nn.Module, ...]:
    """The stages built as vLLM's loader builds them: parameters created under the engine's default dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        return subject.build("cpu")
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_generated_model_serves_in_bfloat16(name):
    subject = get_subject(name)
    stages = _build_in(subject, torch.bfloat16)
    # The runner-stepped stage really is in bfloat16 (else this test would not test the engine's dtype).
    assert torch.bfloat16 in {param.dtype for param in stages[0].parameters()}
    results = subject.run(TEXTS, "cpu", arrival_steps=[0, 1], stages=stages, max_tokens=64)
    for text, result in zip(TEXTS, results, strict=True):
        assert result.finished and not result.aborted, f"{name} in bfloat16, {text!r}: did not finish"
        audio = torch.cat([delta.float().reshape(-1) for delta in result.deltas])
        assert audio.numel() > 0 and torch.isfinite(audio).all(), f"{name} in bfloat16, {text!r}: no finite audio"
