"""I2 — the consumer path handles every output form: Tensor, list of Tensors, ndarray, scalar."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from omnitts.validators import checkids
from omnitts.validators.runtime.scenarios import offline_audio

pytestmark = pytest.mark.usefixtures("omnitts_model")


@pytest.mark.omnitts_check(checkids.I2_CONSUMER_FORMS)
def test_i2_consumer_forms(ctx, record):
    sub = ctx.subject
    consumer = sub.consumer
    if consumer is None:
        pytest.fail(
            f"I2: {sub.name}: no consumer function of multimodal_output['audio'] found (expected "
            "as_waveform(audio) in the example end2end.py, or Subject.consumer)",
            pytrace=False,
        )
    runs = ctx.solo_runs()
    ext = max(runs, key=lambda e: len(runs[e].requests[e].deltas))
    res = runs[ext].requests[ext]
    deltas = [d.reshape(-1).float() for d in res.deltas]
    full = torch.cat(deltas) if deltas else torch.zeros(0)
    forms = {
        "Tensor[N]": (full.clone(), full),
        "Tensor[1,N]": (full.reshape(1, -1).clone(), full),
        "list[Tensor] (pre-consolidation snapshot)": ([d.clone() for d in deltas], full),
        "list[Tensor[1,n]]": ([d.reshape(1, -1).clone() for d in deltas], full),
        "np.ndarray": (full.numpy().copy(), full),
        "scalar 0-d Tensor": (
            full[:1].reshape(()).clone() if full.numel() else torch.tensor(0.0),
            full[:1] if full.numel() else torch.zeros(1),
        ),
        "python float": (float(full[0]) if full.numel() else 0.0, full[:1] if full.numel() else torch.zeros(1)),
        f"release {ctx.profile.version} offline output": (
            res.offline.get("audio") if res.offline else None,
            offline_audio(res.offline),
        ),
    }
    problems = []
    for name, (value, want) in forms.items():
        try:
            got = consumer(value)
            got = torch.as_tensor(np.asarray(got) if not isinstance(got, torch.Tensor) else got).reshape(-1).float()
        except Exception as exc:  # noqa: BLE001 - the consumer's failure is the finding
            problems.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if got.shape != want.shape or not torch.allclose(got, want.float(), atol=1e-6, rtol=0):
            problems.append(f"{name}: returned {tuple(got.shape)} samples, expected {tuple(want.shape)}")
    record(consumer=sub.consumer_origin or getattr(consumer, "__qualname__", str(consumer)), forms=len(forms))
    if problems:
        pytest.fail(
            f"I2: consumer {sub.consumer_origin or consumer} mishandles output forms:\n  " + "\n  ".join(problems),
            pytrace=False,
        )
