"""Fixtures of the reference-model tests. ``OMNITTS_DEVICE=cuda`` runs every model on the GPU (default: cpu)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)  # served_outputs.py, by plain name

DEVICE = os.environ.get("OMNITTS_DEVICE", "cpu")
TEXTS = ["hello world", "The quick brown fox.", "hi"]
ARRIVALS = [0, 1, 3]  # staggered: batches of 1, 2 and 3 requests, requests at different phases


def pytest_configure(config):
    if DEVICE == "cpu":
        torch.set_num_threads(1)  # tiny tensors: extra threads only add contention
    else:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False


@pytest.fixture(scope="session")
def device() -> str:
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip(f"OMNITTS_DEVICE={DEVICE} but CUDA is not available")
    return DEVICE


@pytest.fixture(scope="session")
def atol(device) -> float:
    """Waveform tolerance of served audio vs the HF-style reference (same device)."""
    return 1e-5 if device == "cpu" else 1e-4


@pytest.fixture(scope="session")
def texts() -> list[str]:
    return list(TEXTS)


@pytest.fixture(scope="session")
def arrivals() -> list[int]:
    return list(ARRIVALS)


@pytest.fixture(scope="session")
def references(device):
    """model -> [ReferenceOutput per text] of the HF-style reference (computed once per session)."""
    from omnitts.reference_models import hf_reference

    cache: dict[str, list] = {}

    def get(model: str) -> list:
        if model not in cache:
            ref = hf_reference.make_reference(model, device=device)
            cache[model] = [ref.generate(text) for text in TEXTS]
        return cache[model]

    return get


@pytest.fixture(scope="session")
def served(device):
    """(subject name, variant) -> harness results (``RequestResult``) of TEXTS served concurrently with staggered
    arrivals (memoised)."""
    from omnitts.reference_models.catalog import get_subject

    cache: dict[tuple, list] = {}

    def get(name: str, **overrides):
        key = (name, tuple(sorted(overrides.items())))
        if key not in cache:
            cache[key] = get_subject(name).run(TEXTS, device, arrival_steps=ARRIVALS, **overrides)
        return cache[key]

    return get
