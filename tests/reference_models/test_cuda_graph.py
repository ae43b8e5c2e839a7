"""The two-stage code predictor's inner AR loop: static buffers per batch size (a CUDA graph on CUDA), eager fallback
for other batch sizes, identical results either way."""

from __future__ import annotations

import time

import pytest
import torch

from omnitts.reference_models.catalog import get_subject


def _inputs(talker, batch: int, device: str):
    g = torch.Generator().manual_seed(batch)
    hidden = torch.randn(batch, talker.config.hidden_size, generator=g).to(device)
    frame_idx = torch.arange(batch, dtype=torch.long).to(device)
    target = torch.full((batch,), 20, dtype=torch.long).to(device)
    return hidden, frame_idx, target


@pytest.mark.parametrize("batch", [1, 2, 3, 4])
def test_static_path_equals_eager(batch, device):
    talker = get_subject("ref_two_stage").build(device)[0]
    predictor, weight = talker.code_predictor, talker.model.embed_tokens.weight
    hidden, frame_idx, target = _inputs(talker, batch, device)
    with torch.no_grad():
        eager = predictor.predict_eager(hidden, frame_idx, target, weight)
        for _ in range(3):  # replays reuse the same static buffers
            codes, stop = predictor.predict(hidden, frame_idx, target, weight)
            assert torch.equal(codes, eager[0]) and torch.equal(stop, eager[1])
    static = batch in talker.config.cuda_graph_batch_sizes
    assert (batch in predictor._static_loops) == static, "batch sizes outside cuda_graph_batch_sizes run eagerly"
    if static and device.startswith("cuda"):
        assert predictor._static_loops[batch].graph is not None, "CUDA graph was not captured"


def test_graph_is_captured_once_and_faster_on_cuda(device):
    if not device.startswith("cuda"):
        pytest.skip("CUDA graphs need CUDA")
    talker = get_subject("ref_two_stage").build(device)[0]
    predictor, weight = talker.code_predictor, talker.model.embed_tokens.weight
    hidden, frame_idx, target = _inputs(talker, 1, device)
    with torch.no_grad():
        predictor.predict(hidden, frame_idx, target, weight)
        graph = predictor._static_loops[1].graph
        timings = {}
        for name, fn in (("eager", predictor.predict_eager), ("graph", predictor.predict)):
            for _ in range(5):
                fn(hidden, frame_idx, target, weight)
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(200):
                fn(hidden, frame_idx, target, weight)
            torch.cuda.synchronize()
            timings[name] = (time.perf_counter() - start) / 200
    assert predictor._static_loops[1].graph is graph
    print(f"code predictor step: eager {timings['eager'] * 1e3:.3f} ms, graph {timings['graph'] * 1e3:.3f} ms")
    assert timings["graph"] < timings["eager"]


def test_graph_can_be_switched_off(device):
    subject = get_subject("ref_two_stage")
    talker = subject.build(device, config=subject.make_config(use_cuda_graph=False))[0]
    hidden, frame_idx, target = _inputs(talker, 2, device)
    with torch.no_grad():
        talker.code_predictor.predict(hidden, frame_idx, target, talker.model.embed_tokens.weight)
    assert talker.code_predictor._static_loops[2].graph is None
