"""omnitts's worker extension: I5 and I3 measured inside the engine's own workers, reached by ``collective_rpc``.

vLLM mixes the class named by the ``worker_extension_cls`` engine argument into every worker it starts
(``WorkerWrapperBase.init_worker``) and forwards ``collective_rpc(method)`` to the worker's method of that name. The
engine tier starts the tree's engine with this class (``pytest_options.WORKER_EXTENSION``; offline
``Omni(..., worker_extension_cls=...)``, ``vllm-omni serve --worker-extension-cls``) and calls these methods through
the engine's own ``collective_rpc`` (offline: ``Omni.engine.collective_rpc``; server: vLLM's dev endpoint
``POST /collective_rpc`` under ``VLLM_SERVER_DEV_MODE=1``). Nothing else reaches into the worker.

* ``omnitts_install()`` (once, before any request): wraps the model runner's ``execute_model`` to remember every
  scheduler request id the worker is given and whether the step is steady-state (every scheduled request
  decodes one token, none is new), and wraps the model's own methods (those defined in its package) so the
  sync spy can be armed around model calls only.
* ``omnitts_state()``: the containers the model instance and its submodules hold (the harness's I5 discovery,
  ``validators/runtime/state.py``) and the request ids seen, as a ``WorkerState`` observation; the test process
  judges them.
* ``omnitts_memory()``: the worker's resident set, the bytes of tensors its model holds beyond its weights (the
  harness's ``state.held_bytes``) and CUDA memory allocated, as a ``Memory`` observation (i5.abort_recovery).
* ``omnitts_sync_arm()`` / ``omnitts_sync_report()``: the harness's ``SyncSpy`` (dispatch spy + tensor method
  wrappers on CPU, plus ``torch.cuda.set_sync_debug_mode`` on CUDA) armed around model calls from now on, after
  warm-up; the report counts syncs per step with the model's source lines.

Arguments are JSON-able and results are observation documents (``validators/observations/schema.py``: the dev
endpoint passes strings and returns JSON). Runs inside the engine's workers only (imports torch, never vLLM).
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path

_PREFIX = "omnitts_"
# runner interface methods the harness calls on a model (validators/runtime/harness/stages.py), plus forward
_MODEL_CALLS = ("forward", "compute_logits", "preprocess", "postprocess", "embed_input_ids", "sample")


class _Watch:
    """What one worker's extension keeps: ids seen, the step label, the spy (one per worker)."""

    def __init__(self, model) -> None:
        self.model = model
        self.package = Path(inspect.getfile(type(model))).resolve().parent
        self.seen: list[str] = []
        self.finished: list[str] = []
        self.step = 0
        self.steady: dict[str, int] = {}  # label -> scheduled requests, steady-state steps only
        self.spy = None
        self.armed = False


def _steady(scheduler_output) -> int:
    """Scheduled requests when every one of them decodes one token and none is new, else 0."""
    tokens = getattr(scheduler_output, "num_scheduled_tokens", None) or {}
    if not tokens or getattr(scheduler_output, "scheduled_new_reqs", None):
        return 0
    return len(tokens) if all(int(n) == 1 for n in tokens.values()) else 0


class OmnittsWorkerExtension:
    """Mixed into vLLM's worker by ``worker_extension_cls``; every method here is a ``collective_rpc`` target."""

    def omnitts_install(self) -> dict:
        watch = getattr(self, "_omnitts_watch", None)
        runner = self.model_runner
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        if watch is not None:
            return {"installed": True, "again": True, "model": type(model).__name__}
        watch = self._omnitts_watch = _Watch(model)
        execute = runner.execute_model

        @functools.wraps(execute)
        def execute_model(scheduler_output, *args, **kwargs):
            for new in getattr(scheduler_output, "scheduled_new_reqs", None) or ():
                watch.seen.append(str(new.req_id))
            watch.finished.extend(str(r) for r in getattr(scheduler_output, "finished_req_ids", None) or ())
            watch.step += 1
            n = _steady(scheduler_output)
            if n and watch.armed:
                watch.steady[f"step {watch.step}"] = n
            return execute(scheduler_output, *args, **kwargs)

        runner.execute_model = execute_model
        wrapped = []
        for name in _MODEL_CALLS:
            fn = getattr(model, name, None)
            if not callable(fn) or not _defined_in(fn, watch.package):
                continue
            setattr(model, name, _armed_call(watch, fn))
            wrapped.append(name)
        return {"installed": True, "model": type(model).__name__, "package": str(watch.package), "wrapped": wrapped}

    def omnitts_state(self) -> dict:
        from omnitts.validators.observations import schema
        from omnitts.validators.observations.state import WorkerState
        from omnitts.validators.runtime import state

        watch = self._omnitts_watch
        found = WorkerState(tuple(state.containers([watch.model])), tuple(watch.seen), tuple(watch.finished))
        return schema.dump(found)

    def omnitts_memory(self) -> dict:
        """This worker's resident set, the tensors its model holds beyond its weights, CUDA memory allocated."""
        import gc

        import torch

        from omnitts.validators.observations import schema
        from omnitts.validators.observations.state import Memory
        from omnitts.validators.runtime.memory import rss_bytes
        from omnitts.validators.runtime.state import held_bytes

        watch = self._omnitts_watch
        gc.collect()
        cuda = int(torch.cuda.memory_allocated()) if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        return schema.dump(Memory(rss_bytes(), held_bytes([watch.model]), cuda))

    def omnitts_sync_arm(self) -> dict:
        from omnitts.validators.runtime.syncspy import SyncSpy

        watch = self._omnitts_watch
        files = sorted(str(p) for p in watch.package.rglob("*.py"))
        device = next((p.device.type for p in watch.model.parameters()), "cpu")
        watch.spy = SyncSpy([Path(f) for f in files], device=device)
        watch.steady = {}
        watch.armed = True
        return {"armed": True, "device": device, "files": len(files)}

    def omnitts_sync_report(self) -> dict:
        from omnitts.validators.backends.workers import sync_report
        from omnitts.validators.observations import schema
        from omnitts.validators.observations.state import SyncReport

        watch = self._omnitts_watch
        watch.armed = False
        if watch.spy is None:
            return schema.dump(SyncReport({}, {}, (), {}, (), error="the sync spy was never armed"))
        return schema.dump(sync_report(watch.spy.report, watch.steady, watch.spy.device))


def _defined_in(fn, package: Path) -> bool:
    """Whether ``fn`` (a bound method, seen through decorators such as ``@torch.no_grad()``) is the model's own."""
    code = getattr(inspect.unwrap(getattr(fn, "__func__", fn)), "__code__", None)
    if code is None:
        return False
    return Path(code.co_filename).resolve().is_relative_to(package)


def _armed_call(watch: _Watch, fn):
    """``fn`` with the spy armed around it while the watch is armed (labelled with the runner's current step)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if watch.armed and watch.spy is not None:
            with watch.spy.armed(f"step {watch.step}"):
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return call


assert all(name.startswith(_PREFIX) for name in vars(OmnittsWorkerExtension) if not name.startswith("__"))
