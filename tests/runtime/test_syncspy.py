"""The CPU sync spy sees every host sync the GPU would have, and names the line."""

from __future__ import annotations

import sys
from pathlib import Path

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


def _frame_in(path: str, fn):
    """Call ``fn`` from a frame whose code lies in ``path`` (as a frame of that file would)."""
    namespace: dict = {}
    exec(compile("def call(fn):\n    return fn()\n", path, "exec"), namespace)
    return namespace["call"](fn)


def test_a_sync_with_no_model_frame_is_attributed_to_the_harness_or_to_the_code_outside():
    """set_sync_debug_mode's warnings arrive with whatever stack synced: one from omnitts's own runtime (the harness
    reading tokens back) is named as the harness's line, one from other code as that line, never as nothing."""
    from omnitts.validators.runtime import syncspy

    spy = SyncSpy([Path(__file__).with_name("toys.py")])  # the model's files: none of them on the stack
    harness_file = str(Path(syncspy.__file__).parent / "harness" / "stages.py")
    where, in_model, suppressed = _frame_in(harness_file, lambda: spy._site_full(2))
    assert not in_model and suppressed is None
    assert where.startswith(syncspy.HARNESS) and "harness/stages.py:2 in call" in where
    outside_file = "/srv/vllm/v1/worker/gpu_model_runner.py"
    where, in_model, _ = _frame_in(outside_file, lambda: spy._site_full(2))
    assert not in_model and where.startswith(syncspy.OUTSIDE) and "gpu_model_runner.py:2 in call" in where
    # a model frame further out still wins: the model's line is the one to fix
    model = SyncSpy([__file__])
    where, in_model, _ = _frame_in(outside_file, lambda: model._site_full(2))
    assert in_model and "test_syncspy.py" in where


def test_a_cuda_sync_debug_warning_is_recorded_with_its_line_and_owner():
    """The CUDA path's warning hook (what torch.cuda.set_sync_debug_mode("warn") reaches), fed the warning of a
    device->host copy: a suppressed model line is recorded as suppressed and counts against no step; one the
    harness's own code raises is recorded as the harness's line and counts."""
    from omnitts.validators.runtime import syncspy

    warning = UserWarning("called a synchronizing CUDA operation")
    spy = SyncSpy([__file__])
    spy._label = "stage0 step 3"

    def model_line():
        # omnitts: ignore[OMNI-I3-002] the one budgeted read
        spy._on_warning(warning, UserWarning, "x.py", 1)

    model_line()
    (event,) = spy.report.debug_events
    assert event.in_model and event.suppressed and "model_line" in event.where
    assert spy.report.debug_steps == {}
    harness = SyncSpy([Path(__file__).with_name("toys.py")])
    harness._label = "stage0 step 3"
    namespace: dict = {}
    harness_file = str(Path(syncspy.__file__).parent / "harness" / "stages.py")
    source = "def read_tokens(spy, w):\n    spy._on_warning(w, UserWarning, 'x.py', 1)\n"
    exec(compile(source, harness_file, "exec"), namespace)
    namespace["read_tokens"](harness, warning)
    (event,) = harness.report.debug_events
    assert not event.in_model and event.where.startswith(syncspy.HARNESS) and "read_tokens" in event.where
    assert harness.report.debug_steps == {"stage0 step 3": 1}


MODEL_SOURCE = """
import torch


def stop_flags(x):
    # omnitts: ignore[OMNI-I3-002] the one budgeted read
    return x.tolist()


def unbudgeted(x):
    return x.sum().item()
"""


def test_a_model_reached_through_a_symlinked_checkout_is_still_the_model(tmp_path, monkeypatch):
    """The GPU machine maps the repo's folders onto ``omnitts.*`` by symbolic links: the model's frames then carry
    the link path while its files are listed resolved. Both are compared resolved, so the sync lands on the model's
    line and its suppression holds (compared unresolved, all 25 budgeted reads of ref_single_stage looked foreign
    and unsuppressed, and the I3 record named no line for them)."""
    import importlib

    real = tmp_path / "real" / "linkedmodel"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text(MODEL_SOURCE)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "linkedmodel").symlink_to(real, target_is_directory=True)
    monkeypatch.syspath_prepend(str(shim))
    module = importlib.import_module("linkedmodel")
    try:
        assert "/shim/" in module.stop_flags.__code__.co_filename  # the frames carry the link path
        spy = SyncSpy([real / "__init__.py"])
        with torch.inference_mode(), spy.armed("stage0 step 1"):
            module.stop_flags(torch.arange(3))
            module.unbudgeted(torch.arange(3))
        suppressed, counted = spy.report.events
        assert suppressed.in_model and suppressed.suppressed and "stop_flags" in suppressed.where
        assert counted.in_model and counted.suppressed is None and "unbudgeted" in counted.where
        assert spy.report.steps == {"stage0 step 1": 1}
    finally:
        sys.modules.pop("linkedmodel", None)
