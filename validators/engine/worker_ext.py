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
  ``validators/runtime/state.py``) and the request ids seen; the test process judges them.
* ``omnitts_sync_arm()`` / ``omnitts_sync_report()``: the harness's ``SyncSpy`` (dispatch spy + tensor method
  wrappers on CPU, plus ``torch.cuda.set_sync_debug_mode`` on CUDA) armed around model calls from now on, after
  warm-up; the report counts syncs per step with the model's source lines.

Arguments and results are JSON-able (the dev endpoint passes strings and returns JSON). Runs inside the engine's
workers only (imports torch, never vLLM).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import asdict
from pathlib import Path

_PREFIX = "omnitts_"
# runner interface methods the harness calls on a model (validators/runtime/harness/stages.py), plus forward
_MODEL_CALLS = ("forward", "compute_logits", "preprocess", "postprocess", "embed_input_ids", "sample")


class _Probe:
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
        probe = getattr(self, "_omnitts_probe", None)
        runner = self.model_runner
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        if probe is not None:
            return {"installed": True, "again": True, "model": type(model).__name__}
        probe = self._omnitts_probe = _Probe(model)
        execute = runner.execute_model

        @functools.wraps(execute)
        def execute_model(scheduler_output, *args, **kwargs):
            for new in getattr(scheduler_output, "scheduled_new_reqs", None) or ():
                probe.seen.append(str(new.req_id))
            probe.finished.extend(str(r) for r in getattr(scheduler_output, "finished_req_ids", None) or ())
            probe.step += 1
            n = _steady(scheduler_output)
            if n and probe.armed:
                probe.steady[f"step {probe.step}"] = n
            return execute(scheduler_output, *args, **kwargs)

        runner.execute_model = execute_model
        wrapped = []
        for name in _MODEL_CALLS:
            fn = getattr(model, name, None)
            if not callable(fn) or not _defined_in(fn, probe.package):
                continue
            setattr(model, name, _armed_call(probe, fn))
            wrapped.append(name)
        return {"installed": True, "model": type(model).__name__, "package": str(probe.package), "wrapped": wrapped}

    def omnitts_state(self) -> dict:
        from omnitts.validators.runtime import state

        probe = self._omnitts_probe
        return {
            "containers": [asdict(c) for c in state.containers([probe.model])],
            "seen": list(probe.seen),
            "finished": list(probe.finished),
            "steps": probe.step,
        }

    def omnitts_sync_arm(self) -> dict:
        from omnitts.validators.runtime.syncspy import SyncSpy

        probe = self._omnitts_probe
        files = sorted(str(p) for p in probe.package.rglob("*.py"))
        device = next((p.device.type for p in probe.model.parameters()), "cpu")
        probe.spy = SyncSpy([Path(f) for f in files], device=device)
        probe.steady = {}
        probe.armed = True
        return {"armed": True, "device": device, "files": len(files)}

    def omnitts_sync_report(self) -> dict:
        probe = self._omnitts_probe
        probe.armed = False
        rep = probe.spy.report if probe.spy is not None else None
        if rep is None:
            return {"error": "the sync spy was never armed"}
        return {
            "steady": dict(probe.steady),
            "steps": dict(rep.steps),
            "events": [asdict(e) for e in rep.events],
            "debug_steps": dict(rep.debug_steps),
            "debug_events": [asdict(e) for e in rep.debug_events],
            "device": probe.spy.device,
        }


def _defined_in(fn, package: Path) -> bool:
    """Whether ``fn`` (a bound method, seen through decorators such as ``@torch.no_grad()``) is the model's own."""
    code = getattr(inspect.unwrap(getattr(fn, "__func__", fn)), "__code__", None)
    if code is None:
        return False
    return Path(code.co_filename).resolve().is_relative_to(package)


def _armed_call(probe: _Probe, fn):
    """``fn`` with the spy armed around it while the probe is armed (labelled with the runner's current step)."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if probe.armed and probe.spy is not None:
            with probe.spy.armed(f"step {probe.step}"):
                return fn(*args, **kwargs)
        return fn(*args, **kwargs)

    return call


assert all(name.startswith(_PREFIX) for name in vars(OmnittsWorkerExtension) if not name.startswith("__"))
