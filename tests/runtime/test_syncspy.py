"""The CPU sync spy sees every host sync the GPU would have, and names the line."""

from __future__ import annotations

import pytest
import torch

from omnitts.validators.runtime.syncspy import SyncSpy, graph_breaks

X = torch.arange(6.0)


def _count(fn, mode) -> tuple[int, list]:
    spy = SyncSpy([__file__])
    ctx = torch.inference_mode() if mode == "inference" else torch.no_grad()
    with ctx, spy.armed("t"):
        fn()
    return spy.report.total, spy.report.events


SYNCS = {
    "item": lambda: X.sum().item(),
    "bool": lambda: bool(X.sum() > 0),
    "int": lambda: int(X[1]),
    "float": lambda: float(X[1]),
    "if-tensor": lambda: 1 if X[1] else 0,
    "tolist": lambda: X.tolist(),
    "cpu": lambda: X.cpu(),
    "numpy": lambda: X.numpy(),
    "to-cpu-string": lambda: X.to("cpu"),
    "nonzero": lambda: X.nonzero(),
}
NO_SYNC = {
    "copy_": lambda: torch.empty(1).copy_(X[1]),
    "to-own-device": lambda: X.to(X.device),
    "to-dtype": lambda: X.to(torch.float16),
    "arith": lambda: (X * 2 + 1).sum(),
}


@pytest.mark.parametrize("mode", ["inference", "no_grad"])
@pytest.mark.parametrize("name", sorted(SYNCS))
def test_sync_is_seen(name, mode):
    n, events = _count(SYNCS[name], mode)
    assert n >= 1, name
    assert events[0].in_model and "test_syncspy.py" in events[0].where


@pytest.mark.parametrize("mode", ["inference", "no_grad"])
@pytest.mark.parametrize("name", sorted(NO_SYNC))
def test_no_false_positive(name, mode):
    assert _count(NO_SYNC[name], mode)[0] == 0, name


def test_attribution_names_the_model_line_not_torch():
    def model_code():
        return torch.nn.functional.relu(X).sum().item()  # <- this line

    _, events = _count(model_code, "inference")
    assert "this line" in events[0].where


def test_methods_restored_and_disarmed():
    orig = torch.Tensor.tolist
    spy = SyncSpy([__file__])
    with spy.armed("t"):
        pass
    assert torch.Tensor.tolist is orig
    X.tolist()
    assert spy.report.total == 0


def test_graph_breaks_counts_an_item_break():
    def step(x):
        y = x * 2
        if y.sum().item() > 0:  # graph break
            y = y + 1
        return y

    out = graph_breaks(step, torch.ones(4))
    assert out["graph_break_count"] >= 1 and out["break_reasons"]


def test_suppression_comment_is_honoured_and_reported():
    def model_code():
        # omnitts: ignore[OMNI-I3-003] one read per chunk, after the loop
        return X.tolist()

    spy = SyncSpy([__file__])
    with torch.inference_mode(), spy.armed("t"):
        model_code()
        X.sum().item()
    events = spy.report.events
    assert len(events) == 2 and events[0].suppressed and "one read per chunk" in events[0].suppressed
    assert events[1].suppressed is None and spy.report.steps["t"] == 1


@pytest.mark.parametrize("name", ["tolist", "cpu", "numpy", "to-cpu-string"])
def test_a_gpu_runs_host_reads_of_cpu_tensors_are_not_syncs(name):
    """On a CPU run the host reads stand for the syncs a GPU would make; on a GPU run (spy device "cuda") a CPU
    tensor's ``.numpy()`` syncs nothing. Seen on an H200 (issue 10): the in-worker I3 check counted one
    ``Tensor.numpy`` of a host tensor in the engine's own code path and failed the correct single-stage model."""
    spy = SyncSpy([__file__], device="cuda")
    with torch.inference_mode(), spy.armed("t"):
        SYNCS[name]()
    assert spy.report.total == 0, spy.report.events
