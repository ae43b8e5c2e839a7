"""pytest plugin of the runtime validators: ``pytest validators --model NAME``.

Loaded only where it is asked for: by ``validators/conftest.py`` (``pytest validators ...``) and with ``-p`` by
``omnitts-validate``; never through an entry point, so other pytest sessions of the environment never see it.
Every option has a collision-free ``--omnitts-*`` spelling; the short spellings the docs use (``--model``,
``--device``, ...) are added only when no plugin or conftest of the session took them first. The per-model
parametrisation and the fixtures live in ``validators/checks/conftest.py``, so they apply to the checks only.
All state lives in ``config.stash``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from omnitts.validators.runtime.outcomes import Outcomes

CHECK_MARK = "omnitts_check"
MODEL_PARAM = "omnitts_model"  # the parametrised fixture that carries the model name (validators/checks/conftest.py)
# The engine tier's options (--engine) and fixtures live in their own module.
pytest_plugins = ("omnitts.validators.engine.pytest_options",)


@dataclass
class State:
    """What one session of the validators keeps (``config.stash[STATE]``)."""

    models: list[str]
    root: Path  # the results folder (--omnitts-out)
    out: Path  # this run's folder under root: WAVs, engine logs, results (the same folder on every xdist worker)
    tier: str = "harness"
    outcomes: Outcomes = field(default_factory=lambda: Outcomes([]))
    collector: _Collector | None = None
    journal: object | None = None  # results.Journal of the gathering process
    watcher: object | None = None  # the process that writes the results if this one dies
    early_events: list[dict] = field(default_factory=list)  # events seen before the journal opened
    expected_from_workers: bool = False
    per_model: dict[str, dict] = field(default_factory=dict)  # the verdicts, once the session finished
    contexts: dict[str, object] = field(default_factory=dict)  # model name -> ModelContext (this process)
    written: tuple[Path, ...] = ()
    reserved: bool = False  # this process made the run folder and gathers the results


STATE = pytest.StashKey[State]()

# (short spelling or None, collision-free spelling, argparse attributes); dest is always the long name's
_OPTIONS: list[tuple[str | None, str, dict]] = [
    (
        "--model",
        "--omnitts-model",
        dict(
            action="append",
            default=[],
            metavar="NAME",
            help="model to validate: a reference model, a mutant (model@bug), a model of --omni-root, or "
            "file.py:factory; repeat or comma-separate; 'all' = every reference model and mutant",
        ),
    ),
    (
        "--list-models",
        "--omnitts-list-models",
        dict(action="store_true", default=False, help="print every reference model and mutant name, and exit"),
    ),
    (
        "--omni-root",
        "--omnitts-omni-root",
        dict(
            default=None,
            metavar="DIR",
            help="a vLLM-Omni tree whose vllm_omni/model_executor/models/NAME is validated (needs real vllm)",
        ),
    ),
    ("--device", "--omnitts-device", dict(default="cpu", choices=("cpu", "cuda"), help="device the models run on")),
    (
        "--gpus",
        "--omnitts-gpus",
        dict(
            default=None,
            metavar="LIST",
            help="with --device cuda: GPU indices the run may use (e.g. 0,1; default every visible one); xdist "
            "workers are pinned round-robin over them, workers sharing a GPU split its memory",
        ),
    ),
    (
        "--stage-devices",
        "--omnitts-stage-devices",
        dict(
            default="split",
            choices=("split", "deploy"),
            help="with --device cuda and two or more GPUs: 'split' runs a two-stage model's stages on two different "
            "GPUs (its deploy config's own per-stage devices when they differ), so cross-device payload bugs show; "
            "'deploy' places the stages exactly as the deploy config's per-stage devices say",
        ),
    ),
    (
        None,
        "--omnitts-out",
        dict(default=None, metavar="DIR", help="where WAVs, checklist.md/json and results.json go (./omnitts-out)"),
    ),
    (
        "--omni-release",
        "--omnitts-release",
        dict(
            default=None,
            metavar="X.Y.Z",
            help="target vLLM-Omni release whose runner contract is reproduced (default: the model's)",
        ),
    ),
    (
        "--check-timeout",
        "--omnitts-check-timeout",
        dict(
            default=60.0,
            type=float,
            metavar="S",
            help="seconds of model work one scenario may take; past it (plus a short grace) the model is "
            "interrupted, even inside a blocking call, and its check fails as a hang",
        ),
    ),
    (
        "--require-real-vllm",
        "--omnitts-require-real-vllm",
        dict(
            action="store_true",
            default=False,
            help="fail unless the release's own consolidation function is importable (real-vLLM tier)",
        ),
    ),
]


def _taken_option_names(parser) -> set[str]:
    """Option strings other plugins and conftests of this session registered before us."""
    groups = [getattr(parser, "_anonymous", None), *getattr(parser, "_groups", [])]
    return {name for g in groups if g is not None for opt in g.options for name in opt.names()}


def pytest_addoption(parser):
    taken = _taken_option_names(parser)
    group = parser.getgroup("omnitts", "omnitts runtime validators")
    for short, long, attrs in _OPTIONS:
        names = [long] if short is None or short in taken else [short, long]
        group.addoption(*names, dest=long[2:].replace("-", "_"), **attrs)


def option(config, name: str):
    """The value of ``--omnitts-NAME`` (whichever spelling was used on the command line)."""
    return config.getoption(f"omnitts_{name}")


CATALOGS = pytest.StashKey[tuple]()


def catalogs(config) -> tuple:
    """The installed model catalogs (``runtime/catalogs.py``), found once per session; the plugin hands them to the
    loader."""
    if CATALOGS not in config.stash:
        from omnitts.validators.runtime.catalogs import installed

        config.stash[CATALOGS] = installed()
    return config.stash[CATALOGS]


def _model_names(config) -> list[str]:
    names: list[str] = []
    for raw in option(config, "model") or []:
        for n in str(raw).split(","):
            n = n.strip()
            if n and n not in names:
                names.append(n)
    if "all" in names:
        from omnitts.validators.runtime.loaders import list_model_names

        known = list_model_names(catalogs(config))
        names = [n for n in names if n != "all"] + [n for n in known if n not in names]
    return names


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    if option(config, "list_models"):
        from omnitts.validators.runtime.loaders import list_model_names

        names = list_model_names(catalogs(config))
        if not names:
            sys.stderr.write("no model catalog is installed (omnitts.model_catalogs entry points): pip install -e .\n")
            return 1
        for n in names:
            sys.stdout.write(f"{n}\n")
        sys.stdout.flush()
        return 0
    return None


MARKERS = (f"{CHECK_MARK}(check_id): the checklist id a runtime validator check reports",)


def register_markers(config) -> None:
    """The markers the checks use; also for suites that import the checks without this plugin (omnitts's tests)."""
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if not config.pluginmanager.hasplugin("xdist"):
        config.addinivalue_line("markers", "xdist_group(name): keep tests of one group on one xdist worker")


def _usage_problem(config, models: list[str]) -> str | None:
    """What is wrong with this command line, in one line, before any check runs (None: nothing)."""
    from omnitts.validators.runtime.loaders import model_problem

    tier = config.getoption("omnitts_engine", "harness")
    root = option(config, "omni_root")
    if tier != "harness" and models and not root:
        return f"--engine {tier} runs the tree's own engine: pass --omni-root DIR (the vLLM-Omni tree of the model)"
    for name in models:
        problem = model_problem(name, root, catalogs(config))
        if problem:
            return problem
    timeout = option(config, "check_timeout")
    if not timeout > 0 or timeout == float("inf"):
        return f"--check-timeout {timeout:g}: must be a finite number of seconds above 0"
    out = option(config, "out") or os.environ.get("OMNITTS_OUT")
    if out and Path(out).exists() and not Path(out).is_dir():
        return f"--omnitts-out {out}: a file, not a folder"
    if tier == "harness" and models:
        from omnitts.validators import requirements

        return requirements.missing(models, root, option(config, "require_real_vllm"), option(config, "release"))
    return None


def pytest_configure(config):
    register_markers(config)
    root = Path(option(config, "out") or os.environ.get("OMNITTS_OUT") or "omnitts-out").resolve()
    models = _model_names(config)
    tier = config.getoption("omnitts_engine", "harness")
    state = config.stash[STATE] = State(models=models, root=root, out=root, tier=tier, outcomes=Outcomes(models))
    worker = getattr(config, "workerinput", None)
    if worker is not None and worker.get(RUN_DIR_KEY):
        state.out = Path(worker[RUN_DIR_KEY])
    if state.models and config.pluginmanager.hasplugin("xdist"):
        # keep all checks of one model on one worker so they share its runs (see _LoadGroupOnWorkers)
        if getattr(config.option, "dist", "no") == "load":
            config.option.dist = "loadgroup"
        if worker is not None and worker.get(LOADGROUP_KEY):
            config.option.loadgroup = True
        config.pluginmanager.register(_LoadGroupOnWorkers(), "omnitts-loadgroup")
    if worker is None:
        problem = _usage_problem(config, models)
        if problem:
            raise pytest.UsageError(problem)  # one line, exit 4, before any check runs and before any file is written
    state.collector = _Collector(state)
    config.pluginmanager.register(state.collector, "omnitts-collector")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """The run's folder is made now (not at configure: ``--help`` and ``--markers`` configure too), before xdist
    starts its workers, which are told where it is (``pytest_configure_node``)."""
    config = session.config
    state = config.stash.get(STATE, None)
    if state is None or not state.models or hasattr(config, "workerinput") or config.option.collectonly:
        return
    from omnitts.validators.runtime import results

    state.out = results.reserve_run_dir(state.root, state.tier)
    state.reserved = True


LOADGROUP_KEY = "omnitts_loadgroup"  # workerinput: the controller schedules by xdist_group
RUN_DIR_KEY = "omnitts_run_dir"  # workerinput: this run's folder, made by the controller


class _LoadGroupOnWorkers:
    """Tells every xdist worker that the controller switched to ``--dist loadgroup``, and where this run's folder is.

    The controller's switch (``config.option.dist``, above) never reaches the workers: a worker parses the command
    line again and decides ``config.option.loadgroup`` from its own ``--dist`` in ``xdist.remote.setup_config``,
    before any plugin's ``pytest_configure`` runs. Without ``loadgroup`` a worker does not append ``@<group>`` to
    its node ids, the ``LoadGroupScheduling`` of the controller sees no group, and every check becomes its own unit:
    one model's checks spread over all workers (the 3-worker H200 run of issue 13). ``pytest_configure_node`` runs
    on the controller before the worker starts; the flag it adds to ``workerinput`` is read in the worker's
    ``pytest_configure``.
    """

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        node.workerinput[LOADGROUP_KEY] = getattr(node.config.option, "dist", "no") == "loadgroup"
        node.workerinput[RUN_DIR_KEY] = str(node.config.stash[STATE].out)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        """On a worker: the ``@<group>`` suffix xdist's own hook gives each grouped node id, where it did not take.

        pytest-xdist 3.8 writes ``item._nodeid``; pytest 9.2 keeps node ids in ``item._id`` (a ``NodeId``) and no
        longer reads ``_nodeid``, so the suffix is lost and the controller sees no group (seen in a fresh CI venv:
        pytest 9.2.0, xdist 3.8.0). Runs after xdist's hook; a node id that already carries its group is left alone.
        """
        if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
            return
        for item in items:
            marks = item.iter_markers("xdist_group")
            names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks})
            if not names or item.nodeid.endswith("@" + "_".join(names)):
                continue
            grouped = f"{item.nodeid}@{'_'.join(names)}"
            if hasattr(item, "_id"):  # pytest >= 9.2
                from _pytest.nodeid import NodeId

                item._id = NodeId.parse(grouped)
            else:
                item._nodeid = grouped


# -- results gathering (runs on the xdist controller, or in the single process) ----------------------


class _Collector:
    """Turns pytest's own reports into check outcomes (:mod:`~omnitts.validators.runtime.outcomes`), journaled.

    Every report counts, not only those that carry a check's tag: xdist's report of a crashed worker has no
    ``user_properties``, and a check whose setup passed and whose call never came back must not stay "passed".
    """

    def __init__(self, state: State):
        self.state = state

    def emit(self, event: dict) -> None:
        self.state.outcomes.apply(event)
        if self.state.journal is not None:
            self.state.journal.write(event)
        else:
            self.state.early_events.append(event)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        if hasattr(config, "workerinput"):
            return
        for item in items:  # the single process knows each node's check id before it runs
            mark = item.get_closest_marker(CHECK_MARK)
            callspec = getattr(item, "callspec", None)
            if mark is None or callspec is None or MODEL_PARAM not in callspec.params:
                continue
            tag = {"check": str(mark.args[0]), "model": callspec.params[MODEL_PARAM]}
            self.emit({"kind": "expected", "nodeid": item.nodeid, "tag": tag})

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        if self.state.expected_from_workers:
            return  # every worker collects the same ids
        self.state.expected_from_workers = True
        for nodeid in ids:
            self.emit({"kind": "expected", "nodeid": nodeid})

    def pytest_runtest_logstart(self, nodeid, location):
        self.emit({"kind": "start", "nodeid": nodeid})

    def pytest_runtest_logreport(self, report):
        event = {"kind": "report", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome}
        metrics: dict = {}
        extra: dict = {}
        for name, value in getattr(report, "user_properties", []) or []:
            if name == "omnitts_check":
                event["tag"] = value
            elif name == "omnitts_metrics":
                metrics.update(value)
            elif name == "omnitts_extra":
                extra.update(value)
            elif name == "omnitts_placement":
                event["placement"] = value
        event["metrics"], event["extra"] = metrics, extra
        if report.failed:
            event["message"] = report.longreprtext or str(report.longrepr or "")
        elif report.skipped:
            lr = report.longrepr
            event["message"] = str(lr[2] if isinstance(lr, tuple) and len(lr) == 3 else lr)
        self.emit(event)

    def pytest_collectreport(self, report):
        if report.failed:
            self.emit({"kind": "error", "message": f"collection error in {report.nodeid or 'the session'}"})

    def pytest_internalerror(self, excrepr, excinfo):
        self.emit({"kind": "error", "message": f"pytest internal error: {str(excrepr).strip().splitlines()[-1:]}"})

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """An xdist worker died in a check: its stacks (if faulthandler ended it) go into the failure, and the check
        is not run again (xdist's loadscope/loadgroup requeue the crashed check with the rest of its group, so a
        crashing check would take down every replacement worker until the restart limit, and the model's other
        checks would never run)."""
        from omnitts.validators.runtime import results

        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", None)
        stacks = results.stacks_text(self.state.out, worker) if worker else ""
        if stacks:
            report.longrepr = f"{report.longrepr}\n\n--- stacks when the worker was ended (faulthandler) ---\n{stacks}"
        else:
            report.longrepr = (
                f"{report.longrepr}: the process ended without a Python error (os._exit, a signal, or a fatal error "
                "in native code)"
            )
        for unit in (getattr(sched, "workqueue", None) or {}).values():
            if isinstance(unit, dict) and unit.get(crashitem) is False:
                unit[crashitem] = True


def _placement_lines(per_model: dict[str, dict]) -> list[str]:
    """Which worker and GPU ran each model's checks (only on CUDA runs, where placement is recorded)."""
    return [
        f"{model}: " + ", ".join(f"{device} ({worker})" for worker, device in sorted(info["placement"]))
        for model, info in sorted(per_model.items())
        if info.get("placement")
    ]


def _memory_growth(per_model: dict[str, dict], threshold_mb: float = 128.0) -> list[str]:
    """Checks over which the model process grew by more than ``threshold_mb`` (resident set, or CUDA memory)."""
    lines = []
    for model, info in sorted(per_model.items()):
        for check, metrics in sorted(info["metrics"].items()):
            mem = metrics.get("memory") or {}
            for key in ("rss_growth_mb", "cuda_growth_mb"):
                if (mem.get(key) or 0) > threshold_mb:
                    lines.append(f"{model} {check}: {key.split('_')[0]} +{mem[key]:.0f} MB over the check")
    return lines


def _gathers(config) -> bool:
    """This process gathers the results: the single process or the xdist controller, of a run with models."""
    state = config.stash.get(STATE, None)
    return state is not None and state.reserved and not hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """Checks are about to run: the journal and the watcher start (gathering process), the stack file is armed."""
    config = session.config
    state = config.stash.get(STATE, None)
    if state is None or not state.models or config.option.collectonly:
        return
    from omnitts.validators.runtime import results, timeouts

    if hasattr(config, "workerinput") or not config.pluginmanager.hasplugin("dsession"):
        worker = getattr(config, "workerinput", {}).get("workerid", "main")
        timeouts.dump_stacks_to(state.out / results.STACKS / f"{worker}.txt")
    if _gathers(config) and state.journal is None:
        state.journal = results.Journal(state.out / results.JOURNAL)
        state.journal.write(
            {
                "kind": "session",
                "models": state.models,
                "tier": state.tier,
                "device": option(config, "device"),
                "out": str(state.root),
                "generated": time.strftime("%Y-%m-%dT%H:%M:%S"),
            }
        )
        for event in state.early_events:
            state.journal.write(event)
        state.watcher = results.start_watcher(state.out)


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    state = config.stash.get(STATE, None)
    if not _gathers(config):
        return
    from omnitts.validators.runtime import results

    if int(exitstatus) == int(pytest.ExitCode.INTERRUPTED):
        state.collector.emit({"kind": "error", "message": "the run was interrupted"})
    try:
        if state.outcomes.nodes:
            meta = {
                "tier": state.tier,
                "generated": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "device": option(config, "device"),
                "exit_status": int(exitstatus),
            }
            state.per_model, written = results.write_run(state.out, state.outcomes, meta)
            state.written = tuple(written) + tuple(results.write_merged(state.root))
    finally:
        if state.journal is not None:
            state.journal.close(remove=True)
        results.stop_watcher(state.watcher)
        _tidy_run_dir(state.out)


def _tidy_run_dir(run_dir: Path) -> None:
    """Empty stack files and an empty run folder (nothing ran) are not left behind."""
    import shutil

    from omnitts.validators.runtime import results

    stacks = run_dir / results.STACKS
    if stacks.is_dir() and not results.stacks_text(run_dir):
        shutil.rmtree(stacks, ignore_errors=True)
    if run_dir.is_dir() and not any(run_dir.iterdir()):
        run_dir.rmdir()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash.get(STATE, None)
    if not _gathers(config) or not state.per_model:
        return
    from omnitts.validators.runtime import checklist

    per_model = state.per_model
    tr = terminalreporter
    tr.section("omnitts integration checklist")
    if len(per_model) > 3:  # many models (e.g. --model all): one line each; the full lists are in checklist.md
        for model, info in sorted(per_model.items()):
            rows = checklist.tick(info["results"], info["pattern"], info["unproven"])
            states = ("passed", "failed", "unproven", "skipped", "manual")
            n = {k: sum(1 for r in rows if r["state"] == k) for k in states}
            failed = sorted({c for r in rows for c in r["failed_checks"]})
            tr.write_line(
                f"{model:48s} ticked {n['passed']:2d}  failed {n['failed']:2d}  unproven {n['unproven']:2d}  "
                f"skipped {n['skipped']:2d}  manual {n['manual']:2d}" + (f"  <- {', '.join(failed)}" if failed else "")
            )
    else:
        for model, info in sorted(per_model.items()):
            rows = checklist.tick(info["results"], info["pattern"], info["unproven"])
            tr.write_line(checklist.render_terminal(model, rows))
            for line in info["unproven"]:
                tr.write_line(f"  not proven: {line}")
            tr.write_line("")
    for line in _memory_growth(per_model):
        tr.write_line(f"memory growth: {line}")
    for line in _placement_lines(per_model):
        tr.write_line(f"ran on: {line}")
    tr.write_line(f"this run: {state.out}")
    if state.written:
        tr.write_line("written: " + ", ".join(str(p) for p in state.written))
    wav_root = state.out / "wav"
    if wav_root.is_dir():
        tr.write_line(f"audio of every request: {wav_root}/<model>/<check>/<request>.wav")
    engine_root = state.out / "engine"
    if engine_root.is_dir():
        tr.write_line(f"engine logs and outputs: {engine_root}/<model>/")


def run_from_anywhere(argv: list[str] | None = None) -> int:
    """``omnitts-validate`` (kept here for callers of the old entry point; see :mod:`omnitts.validators.validate`)."""
    from omnitts.validators.validate import main

    return main(argv)
