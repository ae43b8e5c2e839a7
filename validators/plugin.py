"""pytest plugin of the runtime validators: ``pytest validators --model NAME``.

Registered through the ``pytest11`` entry point, so it is loaded by every pytest run in an environment
where omnitts is installed; it stays inert (no torch import) unless the checks are collected.

Options: ``--model NAME`` (repeatable, comma lists, ``all``), ``--list-models``, ``--omni-root DIR``,
``--device {cpu,cuda}``, ``--omnitts-out DIR``, ``--omni-release X.Y.Z``, ``--check-timeout S``.
``omnitts-validate`` (:func:`run_from_anywhere`) runs the same checks out of the installed package.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

CHECK_MARK = "omnitts_check"
# The engine tier's options (--engine) and fixtures live in their own module.
pytest_plugins = ("omnitts.validators.engine.pytest_options",)


def pytest_addoption(parser):
    group = parser.getgroup("omnitts", "omnitts runtime validators")
    group.addoption(
        "--model",
        action="append",
        default=[],
        metavar="NAME",
        help="model to validate: a reference model, a mutant (model@bug), a model of --omni-root, or "
        "file.py:factory; repeat or comma-separate; 'all' = every reference model and mutant",
    )
    group.addoption(
        "--list-models",
        action="store_true",
        default=False,
        help="print every reference model and mutant name, one per line, and exit",
    )
    group.addoption(
        "--omni-root",
        default=None,
        metavar="DIR",
        help="a vLLM-Omni tree whose vllm_omni/model_executor/models/NAME is validated (needs real vllm)",
    )
    group.addoption("--device", default="cpu", choices=("cpu", "cuda"), help="device the models run on")
    group.addoption(
        "--omnitts-out",
        default=None,
        metavar="DIR",
        help="where WAVs, checklist.md/json and results.json go (default ./omnitts-out)",
    )
    group.addoption(
        "--omni-release",
        default=None,
        metavar="X.Y.Z",
        help="target vLLM-Omni release whose runner contract is reproduced (default: the model's)",
    )
    group.addoption(
        "--check-timeout",
        default=60.0,
        type=float,
        metavar="S",
        help="seconds of model work one check may take before it fails as a hang",
    )
    group.addoption(
        "--require-real-vllm",
        action="store_true",
        default=False,
        help="fail unless the release's own consolidation function is importable (real-vLLM tier)",
    )


def _model_names(config) -> list[str]:
    names: list[str] = []
    for raw in config.getoption("model") or []:
        for n in str(raw).split(","):
            n = n.strip()
            if n and n not in names:
                names.append(n)
    if "all" in names:
        from omnitts.validators.runtime.loaders import list_model_names

        names = [n for n in names if n != "all"] + [n for n in list_model_names() if n not in names]
    return names


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    if config.getoption("list_models", False):
        from omnitts.validators.runtime.loaders import list_model_names

        names = list_model_names()
        if not names:
            sys.stderr.write("no reference models found (omnitts.reference_models.catalog missing or empty)\n")
            return 1
        for n in names:
            sys.stdout.write(f"{n}\n")
        sys.stdout.flush()
        return 0
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", f"{CHECK_MARK}(check_id): the checklist id a runtime validator check reports")
    if not config.pluginmanager.hasplugin("xdist"):
        config.addinivalue_line("markers", "xdist_group(name): keep tests of one group on one xdist worker")
    config._omnitts_models = _model_names(config)
    out = config.getoption("omnitts_out", None) or os.environ.get("OMNITTS_OUT") or "omnitts-out"
    config._omnitts_out = Path(out).resolve()
    config._omnitts_records = {}
    config._omnitts_contexts = {}
    if config._omnitts_models and config.pluginmanager.hasplugin("xdist"):
        # keep all checks of one model on one worker so they share its runs
        if getattr(config.option, "dist", "no") == "load":
            config.option.dist = "loadgroup"


def pytest_generate_tests(metafunc):
    if "model_name" not in metafunc.fixturenames:
        return
    names = metafunc.config._omnitts_models
    if not names:
        raise pytest.UsageError(
            "the runtime validators need a model: pytest validators --model NAME (see --list-models, --omni-root)"
        )
    metafunc.parametrize("model_name", [pytest.param(n, marks=pytest.mark.xdist_group(n)) for n in names], ids=names)


@pytest.fixture(scope="session")
def omnitts_options(pytestconfig):
    from omnitts.validators.runtime.context import Options

    device = pytestconfig.getoption("device")
    import torch

    if device == "cpu":
        # tiny models: intra-op threads only add spin-waits, and xdist workers would oversubscribe the cores
        torch.set_num_threads(int(os.environ.get("OMNITTS_TORCH_THREADS", "1")))
    else:
        # functional validation, not speed: TF32 would make batched and solo results differ beyond float32 noise
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return Options(
        device=device,
        omni_root=pytestconfig.getoption("omni_root"),
        release=pytestconfig.getoption("omni_release"),
        out_dir=pytestconfig._omnitts_out,
        timeout=float(pytestconfig.getoption("check_timeout")),
        require_real=bool(pytestconfig.getoption("require_real_vllm")),
    )


@pytest.fixture
def ctx(model_name, omnitts_options, pytestconfig):
    """The model's :class:`ModelContext` (shared by all checks of this model in this process)."""
    from omnitts.validators.runtime.context import ModelContext

    store = pytestconfig._omnitts_contexts
    if model_name not in store:
        store[model_name] = ModelContext(model_name, omnitts_options)
    return store[model_name]


@pytest.fixture
def record(request):
    """``record(metrics=..., extra_checks={...})``: attach numbers and extra checklist ticks to this check."""

    def _record(metrics: dict | None = None, extra_checks: dict | None = None, **kw):
        payload = dict(metrics or {}, **kw)
        if payload:
            request.node.user_properties.append(("omnitts_metrics", _jsonable(payload)))
        if extra_checks:
            request.node.user_properties.append(("omnitts_extra", dict(extra_checks)))

    return _record


@pytest.fixture(autouse=True)
def _omnitts_tag(request):
    mark = request.node.get_closest_marker(CHECK_MARK)
    if mark is not None and "model_name" in request.fixturenames:
        model = request.getfixturevalue("model_name")
        request.node.user_properties.append(("omnitts_check", {"check": mark.args[0], "model": model}))
    yield


def _jsonable(obj):
    try:
        json.dumps(obj)
        return obj
    except TypeError:
        return json.loads(json.dumps(obj, default=str))


# -- results gathering (runs on the xdist controller, or in the single process) ----------------------


def pytest_runtest_logreport(report):
    config = getattr(report, "config", None)
    props = dict()
    tag = None
    metrics: dict = {}
    extra: dict = {}
    for name, value in getattr(report, "user_properties", []) or []:
        if name == "omnitts_check":
            tag = value
        elif name == "omnitts_metrics":
            metrics.update(value)
        elif name == "omnitts_extra":
            extra.update(value)
    if tag is None:
        return
    del props, config
    rec = _RECORDS.setdefault(
        report.nodeid,
        {"check": tag["check"], "model": tag["model"], "outcome": "passed", "metrics": {}, "extra": {}, "message": ""},
    )
    rec["metrics"].update(metrics)
    rec["extra"].update(extra)
    if report.failed:
        rec["outcome"] = "failed"
        rec["message"] = (report.longreprtext or "")[:4000]
    elif report.skipped and rec["outcome"] != "failed":
        rec["outcome"] = "skipped"
        lr = report.longrepr
        rec["message"] = str(lr[2] if isinstance(lr, tuple) and len(lr) == 3 else lr)[:500]
    elif report.when == "call" and rec["outcome"] not in ("failed", "skipped"):
        rec["outcome"] = "passed"


_RECORDS: dict[str, dict] = {}


def _aggregate():
    per_model: dict[str, dict] = {}
    for rec in _RECORDS.values():
        m = per_model.setdefault(rec["model"], {"results": {}, "metrics": {}, "messages": {}, "pattern": None})
        prev = m["results"].get(rec["check"])
        order = {"failed": 3, "passed": 2, "skipped": 1, None: 0}
        if order[rec["outcome"]] > order[prev]:
            m["results"][rec["check"]] = rec["outcome"]
        for k, v in rec["extra"].items():
            if order.get(v, 0) > order[m["results"].get(k)]:
                m["results"][k] = v
        if rec["metrics"]:
            m["metrics"][rec["check"]] = rec["metrics"]
            m["pattern"] = m["pattern"] or rec["metrics"].get("pattern")
        if rec["message"] and rec["outcome"] != "passed":
            m["messages"][rec["check"]] = rec["message"]
    return per_model


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if hasattr(config, "workerinput") or not _RECORDS:
        return
    from omnitts.validators.runtime import checklist

    per_model = _aggregate()
    out = config._omnitts_out
    metrics = {m: info["metrics"] for m, info in per_model.items()}
    md, js = checklist.write(out, per_model, metrics)
    results = {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "device": config.getoption("device"),
        "models": {
            m: {"pattern": i["pattern"], "results": i["results"], "metrics": i["metrics"], "failures": i["messages"]}
            for m, i in per_model.items()
        },
    }
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    config._omnitts_written = (md, js, out / "results.json")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if hasattr(config, "workerinput") or not _RECORDS:
        return
    from omnitts.validators.runtime import checklist

    per_model = _aggregate()
    tr = terminalreporter
    tr.section("omnitts integration checklist")
    if len(per_model) > 3:  # many models (e.g. --model all): one line each; the full lists are in checklist.md
        for model, info in sorted(per_model.items()):
            rows = checklist.tick(info["results"], info["pattern"])
            n = {k: sum(1 for r in rows if r["state"] == k) for k in ("passed", "failed", "skipped", "manual")}
            failed = sorted({c for r in rows for c in r["failed_checks"]})
            tr.write_line(
                f"{model:48s} ticked {n['passed']:2d}  failed {n['failed']:2d}  skipped {n['skipped']:2d}  "
                f"manual {n['manual']:2d}" + (f"  <- {', '.join(failed)}" if failed else "")
            )
    else:
        for model, info in sorted(per_model.items()):
            rows = checklist.tick(info["results"], info["pattern"])
            tr.write_line(checklist.render_terminal(model, rows))
            tr.write_line("")
    written = getattr(config, "_omnitts_written", None)
    if written:
        tr.write_line("written: " + ", ".join(str(p) for p in written))
    wav_root = config._omnitts_out / "wav"
    if wav_root.is_dir():
        tr.write_line(f"audio of every request: {wav_root}/<model>/<check>/<request>.wav")


# -- omnitts-validate ------------------------------------------------------------------------------


def run_from_anywhere(argv: list[str] | None = None) -> int:
    """Console script ``omnitts-validate``: run the installed checks with importlib import mode."""
    import omnitts.validators.checks as checks

    checks_dir = str(Path(checks.__file__).resolve().parent)
    args = list(sys.argv[1:] if argv is None else argv)
    base = ["-c", os.devnull, "--rootdir", checks_dir, "--import-mode=importlib", "-p", "no:cacheprovider", checks_dir]
    return int(pytest.main(base + args))
