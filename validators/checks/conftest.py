"""Fixtures and per-model parametrisation of the runtime checks (this folder only).

The plugin (``omnitts.validators.plugin``) owns options and results; what a check receives lives here, so that
it reaches the checks and nothing else in a session: the model's context, the tier's backend, and ``judged``, which
runs one check (its verdict over the backend's observations) and reports it.
"""

from __future__ import annotations

import json
import os

import pytest

from omnitts.validators.checkids import require
from omnitts.validators.plugin import CHECK_MARK, MODEL_PARAM, STATE, catalogs, option


def pytest_generate_tests(metafunc):
    if "check" in metafunc.fixturenames:
        # one test per check id, check by check (every model's first check, then every model's second, ...)
        from omnitts.validators.verdicts import VERDICTS

        mark = getattr(pytest.mark, CHECK_MARK)
        metafunc.parametrize("check", [pytest.param(c, marks=mark(c), id=c) for c in VERDICTS])
    if MODEL_PARAM not in metafunc.fixturenames:
        return
    names = metafunc.config.stash[STATE].models
    if not names:
        raise pytest.UsageError(
            "the runtime validators need a model: pytest validators --model NAME (see --list-models, --omni-root)"
        )
    # the group name without "@": xdist's LoadGroupScheduling takes what follows the node id's last "@" as the group,
    # and a mutant's name (model@bug) would otherwise group by its bug alone
    params = [pytest.param(n, marks=pytest.mark.xdist_group(n.replace("@", "+"))) for n in names]
    metafunc.parametrize(MODEL_PARAM, params, ids=names)


@pytest.fixture(scope="session")
def omnitts_options(pytestconfig):
    from omnitts.validators.engine.pytest_options import engine_options
    from omnitts.validators.runtime.context import Options

    device = option(pytestconfig, "device")
    import torch

    if device == "cuda":
        _pin_worker_gpu(pytestconfig, torch)
    if device == "cpu":
        # tiny models: intra-op threads only add spin-waits, and xdist workers would oversubscribe the cores
        torch.set_num_threads(int(os.environ.get("OMNITTS_TORCH_THREADS", "1")))
    else:
        # functional validation, not speed: TF32 would make batched and solo results differ beyond float32 noise
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return Options(
        device=device,
        omni_root=option(pytestconfig, "omni_root"),
        release=option(pytestconfig, "release"),
        out_dir=pytestconfig.stash[STATE].out,
        timeout=float(option(pytestconfig, "check_timeout")),
        require_real=bool(option(pytestconfig, "require_real_vllm")),
        placement=pytestconfig.stash.get(PLACEMENT, None),
        catalogs=catalogs(pytestconfig),
        engine=engine_options(pytestconfig),
    )


PLACEMENT = pytest.StashKey["object"]()  # this process's WorkerPlacement on CUDA runs


def _pin_worker_gpu(config, torch) -> None:
    """Pins this process (one xdist worker, or the single process) to its GPU and its share of that GPU's memory.

    "cuda" then means this GPU for every tensor the checks make (``torch.cuda.set_device``), so the checks and the
    harness need no device index of their own. With two or more GPUs and ``--stage-devices split`` a two-stage
    model's later stage runs on another GPU of the run (``ModelContext.stage_devices``): the worker then gets a share
    of every GPU.
    """
    from omnitts.validators.runtime.placement import PlacementError, parse_gpus, place_worker

    worker = getattr(config, "workerinput", {})
    split = option(config, "stage_devices") == "split"
    try:
        gpus = parse_gpus(option(config, "gpus"), torch.cuda.device_count())
        placement = place_worker(worker.get("workerid"), int(worker.get("workercount", 1)), gpus, split_stages=split)
    except PlacementError as exc:
        raise pytest.UsageError(str(exc)) from None
    torch.cuda.set_device(placement.gpu)
    for gpu, fraction in placement.memory_fractions.items():
        torch.cuda.set_per_process_memory_fraction(fraction, gpu)
    config.stash[PLACEMENT] = placement


@pytest.fixture(scope="session")
def _contexts(pytestconfig):
    """Every model's context of this process; their engine sessions stop at the end (also when checks failed)."""
    store = pytestconfig.stash[STATE].contexts
    yield store
    for context in store.values():
        context.close()


@pytest.fixture
def ctx(omnitts_model, omnitts_options, _contexts):
    """The model's :class:`ModelContext` (shared by all checks of this model in this process)."""
    from omnitts.validators.runtime.context import ModelContext

    if omnitts_model not in _contexts:
        _contexts[omnitts_model] = ModelContext(omnitts_model, omnitts_options)
    return _contexts[omnitts_model]


@pytest.fixture
def backend(ctx):
    """The tier's backend (``--engine``) observing this model (one per model and process: what it asked a server
    once, it does not ask again)."""
    from omnitts.validators.engine.pytest_options import backend_class

    if ctx.backend is None:
        ctx.backend = backend_class(ctx.options.engine.tier)(ctx)
    return ctx.backend


@pytest.fixture
def judged(ctx, backend, record):
    """``judged(check)``: the check's verdict over what ``backend`` observes; the audio it names is written under
    the results folder, its metrics and ticks recorded, and a failure (or not applicable: a skip) reported."""
    from omnitts.validators.backends.base import judge
    from omnitts.validators.runtime.context import CheckFailure
    from omnitts.validators.verdicts.base import FAILED, NOT_APPLICABLE

    def run(check: str) -> None:
        try:
            verdict = judge(backend, check)
        except CheckFailure as exc:
            pytest.fail(str(exc), pytrace=False)
        paths = {id(w): str(ctx.write_audio(w.folder, w.name, w.samples, w.sample_rate)) for w in verdict.wavs()}
        record(verdict.metrics, extra_checks=verdict.ticks or None)
        if verdict.outcome == FAILED:
            pytest.fail(verdict.message(lambda w: paths[id(w)]), pytrace=False)
        if verdict.outcome == NOT_APPLICABLE:
            pytest.skip(verdict.headline)

    return run


@pytest.fixture
def record(request):
    """``record(metrics=..., extra_checks={...})``: attach numbers and extra checklist ticks to this check."""

    def _record(metrics: dict | None = None, extra_checks: dict | None = None, **kw):
        payload = dict(metrics or {}, **kw)
        if payload:
            request.node.user_properties.append(("omnitts_metrics", _jsonable(payload)))
        if extra_checks:
            # ticks are ids of the one vocabulary (omnitts.validators.checkids): an unknown id fails the check
            request.node.user_properties.append(("omnitts_extra", {require(k): v for k, v in extra_checks.items()}))

    return _record


@pytest.fixture(autouse=True)
def _omnitts_tag(request):
    """Tags the report with the check id and model, and records the process's memory growth over the check."""
    mark = request.node.get_closest_marker(CHECK_MARK)
    if mark is None or MODEL_PARAM not in request.fixturenames:
        yield
        return
    from omnitts.validators.runtime.memory import MemoryMeter

    model = request.getfixturevalue(MODEL_PARAM)
    request.node.user_properties.append(("omnitts_check", {"check": require(mark.args[0]), "model": model}))
    request.getfixturevalue("omnitts_options")  # pins the GPU before the first check of this process
    placement = request.config.stash.get(PLACEMENT, None)
    worker = getattr(request.config, "workerinput", None)
    if placement is not None:
        where = {"worker": placement.worker, "device": placement.device, "sharing": placement.sharing}
        request.node.user_properties.append(("omnitts_placement", where))
    elif worker is not None:  # a CPU run under xdist: which worker ran the check (one model, one worker)
        where = {"worker": worker["workerid"], "device": "cpu", "sharing": None}
        request.node.user_properties.append(("omnitts_placement", where))
    meter = MemoryMeter(cuda=str(option(request.config, "device")).startswith("cuda"))
    yield
    request.node.user_properties.append(("omnitts_metrics", {"memory": meter.growth()}))


def _jsonable(obj):
    try:
        json.dumps(obj)
        return obj
    except TypeError:
        return json.loads(json.dumps(obj, default=str))
