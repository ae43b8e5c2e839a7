"""The engine tier's pytest wiring: ``--engine {harness,offline,server}`` and which checks each tier runs.

Loaded with omnitts's validators plugin (``pytest_plugins`` in ``validators/plugin.py``), so only where that is.
Each tier is a backend (``harness``, the default: omnitts's fast harness; ``offline``: the tree's own offline
``Omni``; ``server``: the tree's own ``vllm-omni serve``); a check runs in a tier when its backend can make every
observation the check's verdict needs, and is deselected otherwise, with the reason in the summary. The engine runs
once per model per session (``validators/engine/session.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

TIERS = ("harness", "offline", "server")
DESELECTED = pytest.StashKey[dict]()  # check id -> why this tier does not run it


def backend_class(tier: str):
    """The backend a tier observes with."""
    if tier == "offline":
        from omnitts.validators.backends.offline import OfflineBackend

        return OfflineBackend
    if tier == "server":
        from omnitts.validators.backends.server import ServerBackend

        return ServerBackend
    from omnitts.validators.backends.harness import HarnessBackend

    return HarnessBackend


# A machine whose engine starts queue behind other users' (vLLM-Omni's machine-wide device init lock) sets a longer
# bound here once, for the engine tiers and omnitts-serve alike.
TIMEOUT_VAR = "OMNITTS_ENGINE_TIMEOUT"


def engine_timeout_default() -> float:
    import os

    raw = os.environ.get(TIMEOUT_VAR)
    try:
        return float(raw) if raw else 600.0
    except ValueError:
        raise pytest.UsageError(f"{TIMEOUT_VAR}={raw}: not a number of seconds") from None


def pytest_addoption(parser):
    from omnitts.validators.plugin import _taken_option_names

    taken = _taken_option_names(parser)
    group = parser.getgroup("omnitts")
    group.addoption(
        *(["--omnitts-engine"] if "--engine" in taken else ["--engine", "--omnitts-engine"]),
        dest="omnitts_engine",
        default="harness",
        choices=TIERS,
        help="tier the runtime checks run in: omnitts's fast harness (default), the tree's own offline Omni, or "
        "the tree's own `vllm-omni serve` (needs --omni-root; builds the cached engine environment)",
    )
    group.addoption(
        "--omnitts-engine-release", default=None, help="vLLM-Omni release of the engine (default: the tree's)"
    )
    group.addoption(
        "--omnitts-engine-timeout",
        default=engine_timeout_default(),
        type=float,
        help=f"seconds for one engine start or run (default ${TIMEOUT_VAR}, else 600)",
    )

    def spellings(short: str) -> list[str]:  # the short spelling only when no other plugin took it
        return [f"--omnitts-{short[2:]}"] if short in taken else [short, f"--omnitts-{short[2:]}"]

    group.addoption(
        *spellings("--checkpoint"),
        dest="omnitts_checkpoint",
        default=None,
        metavar="PATH",
        help="engine tier: use this model directory (config.json, tokenizer, *.safetensors) instead of building the "
        "tiny scaffolded model's; any model of --omni-root then runs (one --model)",
    )
    group.addoption(
        *spellings("--dummy-weights"),
        dest="omnitts_dummy_weights",
        action="store_true",
        default=False,
        help="engine tier: start the engine with vLLM's load_format=dummy (random weights), so a checkpoint "
        "directory without weights (config + tokenizer only) runs",
    )
    group.addoption(
        *spellings("--engine-python"),
        dest="omnitts_engine_python",
        default=None,
        metavar="PYTHON",
        help="engine tier: run the engine in this Python as it is (it must import vllm and the tree's vllm_omni; "
        "also $OMNITTS_ENGINE_PYTHON); default: this Python when it does, else the cached CPU engine environment "
        "(never built on a machine with a GPU)",
    )
    group.addoption(
        *spellings("--reference"),
        dest="omnitts_reference",
        default=None,
        metavar="CAPTURE",
        help="reference parity: compare the model with this capture of its reference implementation "
        "(omnitts-capture's folder) and run the parity.* checks; at --engine offline with the capture's --checkpoint",
    )
    group.addoption(
        "--omnitts-request-info",
        default=None,
        metavar="JSON",
        help="engine tier, offline, for a model without an example that defines build_request: a JSON object whose "
        'keys go into every request\'s additional_information (e.g. \'{"speaker": "tiny"}\')',
    )


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        problem = checkpoint_problem(
            config.getoption("omnitts_engine", "harness"),
            config.getoption("omnitts_checkpoint", None),
            bool(config.getoption("omnitts_dummy_weights", False)),
            config.getoption("omnitts_model", None) or [],
        )
        problem = problem or request_info_problem(config.getoption("omnitts_request_info", None))
        problem = problem or reference_problem(
            config.getoption("omnitts_engine", "harness"), config.getoption("omnitts_reference", None)
        )
        if problem:
            raise pytest.UsageError(problem)  # one line, exit 4, before any check runs


def request_info_problem(raw: str | None) -> str | None:
    """``--omnitts-request-info`` must be a JSON object (one line when it is not), or absent."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return f"--omnitts-request-info: not JSON ({exc})"
    return None if isinstance(value, dict) else "--omnitts-request-info: must be a JSON object"


def reference_problem(tier: str, reference: str | None) -> str | None:
    """What is wrong with ``--reference CAPTURE`` (one line), or None: a readable capture, at a tier that runs it."""
    if reference is None:
        return None
    from omnitts.validators.checkids import PARITY_CODES

    backend = backend_class(tier)
    if not backend.runs(PARITY_CODES):
        return f"--reference: {backend.title} (--engine {tier}) cannot run the parity checks; use --engine offline"
    from omnitts.validators.parity.capture_file import CaptureError, read_capture

    try:
        read_capture(Path(reference))
    except (CaptureError, OSError, KeyError, ValueError) as exc:
        return f"--reference {reference}: {exc}"
    return None


def checkpoint_problem(tier: str, checkpoint: str | None, dummy: bool, models: list[str]) -> str | None:
    """What is wrong with ``--checkpoint`` / ``--dummy-weights`` on this command line (one line), or None."""
    if not checkpoint and not dummy:
        return None
    if tier == "harness":
        flag = "--checkpoint" if checkpoint else "--dummy-weights"
        return f"{flag} applies to the engine tier: add --engine offline or --engine server"
    if not checkpoint:
        return None  # --dummy-weights alone: the built tiny model directory, loaded with dummy weights
    names = {n.strip() for raw in models for n in str(raw).split(",") if n.strip()}
    if len(names) != 1 or "all" in names:
        return f"--checkpoint {checkpoint} is one model's directory: pass exactly one --model (got {sorted(names)})"
    path = Path(checkpoint)
    if not path.is_dir():
        return f"--checkpoint {checkpoint}: no such directory"
    if not (path / "config.json").is_file():
        return f"--checkpoint {checkpoint}: no config.json in it (a model directory has config.json and a tokenizer)"
    if not dummy and not any(path.glob("*.safetensors")):
        return (
            f"--checkpoint {checkpoint} has no *.safetensors weights: pass --dummy-weights to run it with vLLM's "
            "dummy weights (load_format=dummy)"
        )
    return None


def pytest_collection_modifyitems(config, items):
    from omnitts.validators.checkids import PARITY
    from omnitts.validators.plugin import CHECK_MARK, MODEL_PARAM

    tier = config.getoption("omnitts_engine", "harness")
    backend = backend_class(tier)
    reference = config.getoption("omnitts_reference", None)
    keep, drop, why = [], [], {}
    for item in items:
        mark = item.get_closest_marker(CHECK_MARK)
        if MODEL_PARAM not in getattr(item, "fixturenames", ()) or mark is None:
            keep.append(item)  # not a validator check: never touched (other suites in the same session)
            continue
        missing = [kind.__name__ for kind in backend.missing(mark.args[0])]
        if mark.args[0] in PARITY and not reference:
            missing.append("--reference CAPTURE")  # a parity check compares with a capture: none, nothing to judge
        (drop if missing else keep).append(item)
        if missing:
            why[mark.args[0]] = ", ".join(missing)
    config.stash[DESELECTED] = why
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    why = config.stash.get(DESELECTED, {})
    if why and not hasattr(config, "workerinput"):
        tier = config.getoption("omnitts_engine", "harness")
        title = backend_class(tier).title
        terminalreporter.write_line(
            f"not run at --engine {tier} ({title} cannot observe what their verdicts need, or an option is missing):"
        )
        for check, kinds in sorted(why.items()):
            terminalreporter.write_line(f"  {check}: needs {kinds}")


def engine_placement(config, tree: Path, model: str, release: str, device_count=None):
    """The session's :class:`StagePlacement`: none on ``--device cpu``; on ``--device cuda`` the run's GPUs (``--gpus``,
    default every visible one) as ``CUDA_VISIBLE_DEVICES``, and with two or more GPUs a two-stage model's stages on
    two of them (``--stage-devices``), through the release's per-stage ``devices`` overrides."""
    from omnitts.knowledge.configs import tree_model_deploy
    from omnitts.validators.engine.runtime import StagePlacement, stage_placement
    from omnitts.validators.plugin import option
    from omnitts.validators.runtime.placement import PlacementError, parse_gpus

    if option(config, "device") != "cuda":
        return StagePlacement()
    if device_count is None:
        import torch

        device_count = torch.cuda.device_count()
    deploy, stages = tree_model_deploy(tree, model)
    try:
        gpus = parse_gpus(option(config, "gpus"), device_count)
        split = option(config, "stage_devices") == "split"
        return stage_placement(release, deploy, stages, gpus, split_stages=split)
    except PlacementError as exc:
        raise pytest.UsageError(str(exc)) from None


def engine_release(config, tree: Path) -> str:
    """The release whose engine runs the tree: ``--omnitts-engine-release``, else the tree's own."""
    chosen = config.getoption("omnitts_engine_release")
    if chosen:
        return chosen
    from omnitts.knowledge.layout import tree_version

    version = tree_version(tree)
    if version is None:
        raise pytest.UsageError(f"--engine: cannot read the release of {tree}; pass --engine-release X.Y.Z")
    return version


def engine_options(config):
    """The session's :class:`EngineOptions` (the stage placement is chosen per model, when its engine starts)."""
    from omnitts.validators.plugin import option
    from omnitts.validators.runtime.context import EngineOptions

    tier = config.getoption("omnitts_engine", "harness")
    root = option(config, "omni_root")
    reference = config.getoption("omnitts_reference", None)
    reference = Path(reference).resolve() if reference else None
    if tier == "harness" or not root:
        return EngineOptions(tier, reference=reference)
    tree = Path(root).resolve()
    release = engine_release(config, tree)
    checkpoint = config.getoption("omnitts_checkpoint")
    return EngineOptions(
        tier,
        release,
        config.getoption("omnitts_engine_timeout"),
        Path(checkpoint) if checkpoint else None,
        bool(config.getoption("omnitts_dummy_weights")),
        json.loads(config.getoption("omnitts_request_info") or "null"),
        lambda model: engine_placement(config, tree, model, release),
        reference,
        python=config.getoption("omnitts_engine_python"),
    )
