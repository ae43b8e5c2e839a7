"""pytest plugin of the runtime validators: ``pytest validators --model NAME``.

Loaded only where it is asked for: by ``validators/conftest.py`` (``pytest validators ...``) and with ``-p`` by
``omnitts-validate``; never through an entry point, so other pytest sessions of the environment never see it.
Every option has a collision-free ``--omnitts-*`` spelling; the short spellings the docs use (``--model``,
``--device``, ...) are added only when no plugin or conftest of the session took them first. The per-model
parametrisation and the fixtures live in ``validators/checks/conftest.py``, so they apply to the checks only.
All state lives in ``config.stash``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHECK_MARK = "omnitts_check"
MODEL_PARAM = "omnitts_model"  # the parametrised fixture that carries the model name (validators/checks/conftest.py)
# The engine tier's options (--engine) and fixtures live in their own module.
pytest_plugins = ("omnitts.validators.engine.pytest_options",)


@dataclass
class State:
    """What one session of the validators keeps (``config.stash[STATE]``)."""

    models: list[str]
    out: Path
    records: dict[str, dict] = field(default_factory=dict)  # nodeid -> outcome, metrics, messages of one check
    contexts: dict[str, object] = field(default_factory=dict)  # model name -> ModelContext (this process)
    written: tuple[Path, ...] = ()


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


def _model_names(config) -> list[str]:
    names: list[str] = []
    for raw in option(config, "model") or []:
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
    if option(config, "list_models"):
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
    out = option(config, "out") or os.environ.get("OMNITTS_OUT") or "omnitts-out"
    state = config.stash[STATE] = State(models=_model_names(config), out=Path(out).resolve())
    if state.models and config.pluginmanager.hasplugin("xdist"):
        # keep all checks of one model on one worker so they share its runs (see _LoadGroupOnWorkers)
        if getattr(config.option, "dist", "no") == "load":
            config.option.dist = "loadgroup"
        if hasattr(config, "workerinput") and config.workerinput.get(LOADGROUP_KEY):
            config.option.loadgroup = True
        config.pluginmanager.register(_LoadGroupOnWorkers(), "omnitts-loadgroup")
    # The engine tiers bring their own vLLM (the cached engine environment): this process needs none.
    harness_tier = config.getoption("omnitts_engine", "harness") == "harness"
    if state.models and harness_tier and not hasattr(config, "workerinput"):
        from omnitts.validators import requirements

        problem = requirements.missing(
            state.models, option(config, "omni_root"), option(config, "require_real_vllm"), option(config, "release")
        )
        if problem:
            raise pytest.UsageError(problem)  # one line, exit 4, before any check runs
    config.pluginmanager.register(_Collector(state), "omnitts-collector")


LOADGROUP_KEY = "omnitts_loadgroup"  # workerinput: the controller schedules by xdist_group


class _LoadGroupOnWorkers:
    """Tells every xdist worker that the controller switched to ``--dist loadgroup``.

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
    """Turns the checks' reports (their ``user_properties``) into per-check records in the session state."""

    def __init__(self, state: State):
        self.state = state

    def pytest_runtest_logreport(self, report):
        tag = None
        placement = None
        metrics: dict = {}
        extra: dict = {}
        for name, value in getattr(report, "user_properties", []) or []:
            if name == "omnitts_check":
                tag = value
            elif name == "omnitts_metrics":
                metrics.update(value)
            elif name == "omnitts_extra":
                extra.update(value)
            elif name == "omnitts_placement":
                placement = value
        if tag is None:
            return
        rec = self.state.records.setdefault(
            report.nodeid,
            {
                "check": tag["check"],
                "model": tag["model"],
                "outcome": "passed",
                "metrics": {},
                "extra": {},
                "message": "",
            },
        )
        rec["metrics"].update(metrics)
        rec["extra"].update(extra)
        if placement:
            rec["placement"] = placement
        if report.failed:
            rec["outcome"] = "failed"
            rec["message"] = (report.longreprtext or "")[:4000]
        elif report.skipped and rec["outcome"] != "failed":
            rec["outcome"] = "skipped"
            lr = report.longrepr
            rec["message"] = str(lr[2] if isinstance(lr, tuple) and len(lr) == 3 else lr)[:500]


_ORDER = {"failed": 3, "passed": 2, "skipped": 1, None: 0}


def _aggregate(records: dict[str, dict]) -> dict[str, dict]:
    per_model: dict[str, dict] = {}
    for rec in records.values():
        m = per_model.setdefault(rec["model"], {"results": {}, "metrics": {}, "messages": {}, "pattern": None})
        if _ORDER[rec["outcome"]] > _ORDER[m["results"].get(rec["check"])]:
            m["results"][rec["check"]] = rec["outcome"]
        for k, v in rec["extra"].items():
            if _ORDER.get(v, 0) > _ORDER[m["results"].get(k)]:
                m["results"][k] = v
        if rec["metrics"]:
            m["metrics"][rec["check"]] = rec["metrics"]
            m["pattern"] = m["pattern"] or rec["metrics"].get("pattern")
        if rec["message"] and rec["outcome"] != "passed":
            m["messages"][rec["check"]] = rec["message"]
        if rec.get("placement"):
            m.setdefault("placement", set()).add((rec["placement"]["worker"], rec["placement"]["device"]))
    return per_model


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


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    state = config.stash.get(STATE, None)
    if hasattr(config, "workerinput") or state is None or not state.records:
        return
    from omnitts.validators.runtime import checklist

    per_model = _aggregate(state.records)
    metrics = {m: info["metrics"] for m, info in per_model.items()}
    md, js = checklist.write(state.out, per_model, metrics)
    results = {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "device": option(config, "device"),
        "models": {
            m: {
                "pattern": i["pattern"],
                "results": i["results"],
                "metrics": i["metrics"],
                "failures": i["messages"],
                "ran_on": [{"worker": w, "device": d} for w, d in sorted(i.get("placement", ()))],
            }
            for m, i in per_model.items()
        },
    }
    (state.out / "results.json").write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    state.written = (md, js, state.out / "results.json")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash.get(STATE, None)
    if hasattr(config, "workerinput") or state is None or not state.records:
        return
    from omnitts.validators.runtime import checklist

    per_model = _aggregate(state.records)
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
    for line in _memory_growth(per_model):
        tr.write_line(f"memory growth: {line}")
    for line in _placement_lines(per_model):
        tr.write_line(f"ran on: {line}")
    if state.written:
        tr.write_line("written: " + ", ".join(str(p) for p in state.written))
    wav_root = state.out / "wav"
    if wav_root.is_dir():
        tr.write_line(f"audio of every request: {wav_root}/<model>/<check>/<request>.wav")


def run_from_anywhere(argv: list[str] | None = None) -> int:
    """``omnitts-validate`` (kept here for callers of the old entry point; see :mod:`omnitts.validators.validate`)."""
    from omnitts.validators.validate import main

    return main(argv)
