"""The engine tier's pytest wiring: ``--engine {harness,offline,server}`` and the per-model engine fixtures.

Loaded with omnitts's validators plugin (``pytest_plugins`` in ``validators/plugin.py``), so only where that is.
``harness`` (the default)
keeps today's fast tier and deselects the engine checks; ``offline`` and ``server`` select the checks of
``validators/checks/test_engine_tier.py`` that apply to that tier and deselect the harness checks, so every
selected check runs and none is skipped. The engine runs once per model per session: one offline ``Omni`` run
of a fixed plan, or one ``vllm-omni serve`` (stopped at session end, also when checks fail).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

TIERS = ("harness", "offline", "server")
# omnitts's worker extension, mixed into the engine's workers (``worker_extension_cls``) for the in-worker checks
WORKER_EXTENSION = "omnitts.validators.engine.worker_ext.OmnittsWorkerExtension"
ENGINE_MARK = "omnitts_engine"  # @pytest.mark.omnitts_engine("offline", "server"): the tiers a check runs in

# Texts of the engine plan: distinct lengths and characters; the last two share a prefix.
TEXTS = (
    "Hello there.",
    "A second, longer sentence for the engine tier.",
    "Third one!",
    "Four: the last text, with digits 0123.",
    "Four: the last text, with digits 4567.",
)
# A request long enough to be aborted (offline) or left (server) while it still streams.
LONG_TEXT = "A long sentence that streams for many steps, so that it can be aborted while it still speaks, twice over."


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
    group.addoption("--omnitts-engine-timeout", default=600.0, type=float, help="seconds for one engine start or run")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{ENGINE_MARK}(*tiers): an engine-tier check and the tiers it runs in")


def pytest_collection_modifyitems(config, items):
    from omnitts.validators.plugin import MODEL_PARAM

    tier = config.getoption("omnitts_engine", "harness")
    keep, drop = [], []
    for item in items:
        if MODEL_PARAM not in getattr(item, "fixturenames", ()):
            keep.append(item)  # not a validator check: never touched (other suites in the same session)
            continue
        mark = item.get_closest_marker(ENGINE_MARK)
        runs_here = (tier in mark.args) if mark is not None else (tier == "harness")
        (keep if runs_here else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class EngineModel:
    """One model of ``--omni-root`` through the engine: environment, model directory, offline run, server."""

    def __init__(self, tree: Path, model: str, release: str, work: Path, timeout: float, placement=None) -> None:
        from omnitts.validators.engine.runtime import EngineEnv

        self.tree, self.model, self.release, self.work, self.timeout = tree, model, release, work, timeout
        self.env = EngineEnv.prepare(tree, release, work, placement)
        self.model_dir = self.env.model_dir(model, _model_dir_cache(tree, model, release))
        self.config = json.loads((self.model_dir / "config.json").read_text())
        self._offline: dict | None = None
        self.server = None

    @property
    def sample_rate(self) -> int:
        return int(self.config.get("sample_rate", 24000))

    def offline(self) -> dict:
        if self._offline is None:
            texts = list(TEXTS)
            plan = {
                "texts": texts,
                # Compositions: all at once, reversed, and with a duplicate (same text twice in one batch).
                "batches": [texts[:4], list(reversed(texts)), [texts[0], texts[2], texts[0], texts[4]]],
                "stage_init_timeout": int(self.timeout),
                # I5/I3 inside the workers (validators/engine/worker_ext.py), after the scenarios
                "worker_extension_cls": WORKER_EXTENSION,
                "long_text": LONG_TEXT,
                "sequential": 100,
            }
            example = self.tree / "examples" / "offline_inference" / "text_to_speech" / self.model / "end2end.py"
            if example.is_file():
                plan["example"] = str(example)
            self._offline = self.env.offline(self.model_dir, plan, self.work / "offline", timeout=self.timeout)
        return self._offline

    def start_server(self):
        from omnitts.validators.engine.runtime import Server

        if self.server is None:
            self.server = Server(self.env, self.model_dir, self.work / "server.log", worker_extension=WORKER_EXTENSION)
            self.server.start(timeout=self.timeout)
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def _model_dir_cache(tree: Path, model: str, release: str) -> Path:
    """Where the model directory of this model's source is cached: keyed by the model folder's content (and the
    builder's), so an edited model gets a new directory and an unchanged one is not rebuilt."""
    import hashlib

    from omnitts.knowledge.releases import cache_root
    from omnitts.validators.engine import modeldir

    digest = hashlib.sha256(f"{release}:{model}".encode())
    digest.update(Path(modeldir.__file__).read_bytes())
    folder = tree / "vllm_omni" / "model_executor" / "models" / model
    for path in sorted(folder.rglob("*.py")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return cache_root() / "engine-models" / f"{model}-{digest.hexdigest()[:16]}"


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


def _release(config, tree: Path) -> str:
    chosen = config.getoption("omnitts_engine_release")
    if chosen:
        return chosen
    from omnitts.knowledge.layout import tree_version

    version = tree_version(tree)
    if version is None:
        raise pytest.UsageError(f"--engine: cannot read the release of {tree}; pass --engine-release X.Y.Z")
    return version


@pytest.fixture(scope="session")
def _engine_models(pytestconfig):
    store: dict[str, EngineModel] = {}
    yield store
    for engine_model in store.values():
        engine_model.close()


@pytest.fixture
def engine(omnitts_model, pytestconfig, _engine_models) -> EngineModel:
    """The model under test through the tree's own engine (built once per model per session)."""
    from omnitts.validators.plugin import option

    model_name = omnitts_model
    root = option(pytestconfig, "omni_root")
    if not root:
        pytest.fail("--engine offline/server runs the tree's own engine: pass --omni-root DIR", pytrace=False)
    if model_name not in _engine_models:
        tree = Path(root).resolve()
        work = Path(tempfile.mkdtemp(prefix=f"omnitts-engine-{model_name}-"))
        release = _release(pytestconfig, tree)
        placement = engine_placement(pytestconfig, tree, model_name, release)
        try:
            _engine_models[model_name] = EngineModel(
                tree, model_name, release, work, pytestconfig.getoption("omnitts_engine_timeout"), placement
            )
        except Exception as exc:  # fail closed, with the step and the log's tail
            pytest.fail(f"engine tier for {model_name}: {exc}", pytrace=False)
    return _engine_models[model_name]
