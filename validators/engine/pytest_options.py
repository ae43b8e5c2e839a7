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
        "--omnitts-request-info",
        default=None,
        metavar="JSON",
        help="engine tier, offline, for a model without an example that defines build_request: a JSON object whose "
        'keys go into every request\'s additional_information (e.g. \'{"speaker": "tiny"}\')',
    )


def pytest_configure(config):
    config.addinivalue_line("markers", f"{ENGINE_MARK}(*tiers): an engine-tier check and the tiers it runs in")
    if not hasattr(config, "workerinput"):
        problem = checkpoint_problem(
            config.getoption("omnitts_engine", "harness"),
            config.getoption("omnitts_checkpoint", None),
            bool(config.getoption("omnitts_dummy_weights", False)),
            config.getoption("omnitts_model", None) or [],
        )
        problem = problem or request_info_problem(config.getoption("omnitts_request_info", None))
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

    def __init__(
        self,
        tree: Path,
        model: str,
        release: str,
        work: Path,
        timeout: float,
        placement=None,
        *,
        checkpoint: Path | None = None,
        dummy_weights: bool = False,
        request_info: dict | None = None,
    ) -> None:
        from omnitts.validators.engine.runtime import EngineEnv

        self.tree, self.model, self.release, self.work, self.timeout = tree, model, release, work, timeout
        self.env = EngineEnv.prepare(tree, release, work, placement)
        # --checkpoint: the given directory as it is (any model of the tree); else the tiny scaffolded model's,
        # built from its source (validators/engine/modeldir.py, which needs the scaffold's shape).
        if checkpoint is not None:
            self.model_dir = Path(checkpoint).resolve()
        else:
            self.model_dir = self.env.model_dir(model, _model_dir_cache(tree, model, release))
        self.load_format = "dummy" if dummy_weights else None
        self.request_info = request_info
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
                **engine_kwargs(self.load_format, self.model_dir),
            }
            example = self.tree / "examples" / "offline_inference" / "text_to_speech" / self.model / "end2end.py"
            if example.is_file():
                plan["example"] = str(example)
            if self.request_info:
                plan["request_info"] = self.request_info
            self._offline = self.env.offline(self.model_dir, plan, self.work / "offline", timeout=self.timeout)
        return self._offline

    def start_server(self):
        from omnitts.validators.engine.runtime import Server

        if self.server is None:
            self.server = Server(
                self.env,
                self.model_dir,
                self.work / "server.log",
                worker_extension=WORKER_EXTENSION,
                engine_kwargs=engine_kwargs(self.load_format, self.model_dir),
            )
            self.server.start(timeout=self.timeout)
        return self.server

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


DEPLOY_FILE = "omnitts_deploy.yaml"  # a model directory's own deploy config (validators/engine/upstream.py writes one)


def engine_kwargs(load_format: str | None, model_dir: Path) -> dict:
    """Engine arguments beyond the model directory: ``load_format`` (``--dummy-weights``) and, when the directory
    holds ``omnitts_deploy.yaml``, that file as ``deploy_config``. The offline driver passes them to ``Omni(...)``;
    the server turns them into ``--load-format`` / ``--deploy-config`` (``runtime.serve_args``)."""
    found: dict = {}
    if load_format:
        found["load_format"] = load_format
    if (Path(model_dir) / DEPLOY_FILE).is_file():
        found["deploy_config"] = str(Path(model_dir) / DEPLOY_FILE)
    return found


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
            checkpoint = pytestconfig.getoption("omnitts_checkpoint")
            _engine_models[model_name] = EngineModel(
                tree,
                model_name,
                release,
                work,
                pytestconfig.getoption("omnitts_engine_timeout"),
                placement,
                checkpoint=Path(checkpoint) if checkpoint else None,
                dummy_weights=bool(pytestconfig.getoption("omnitts_dummy_weights")),
                request_info=json.loads(pytestconfig.getoption("omnitts_request_info") or "null"),
            )
        except Exception as exc:  # fail closed, with the step and the log's tail
            pytest.fail(f"engine tier for {model_name}: {exc}", pytrace=False)
    return _engine_models[model_name]
