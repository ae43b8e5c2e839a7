"""One model of an ``--omni-root`` tree through the tree's own engine: its environment, model directory, one offline
run of a fixed plan, one ``vllm-omni serve`` (stopped at session end, also when checks fail)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from omnitts.knowledge import layout
from omnitts.knowledge.engine import omni_timeout_kwargs
from omnitts.validators.backends.texts import LONG_TEXT, TEXTS
from omnitts.validators.observations.engine import OfflineRun
from omnitts.validators.runtime import audio

# omnitts's worker extension, mixed into the engine's workers (``worker_extension_cls``) for the in-worker checks
WORKER_EXTENSION = "omnitts.validators.engine.worker_ext.OmnittsWorkerExtension"
DEPLOY_FILE = "omnitts_deploy.yaml"  # a model directory's own deploy config (validators/engine/upstream.py writes one)
SEQUENTIAL = 100  # requests of the growth loop
SEED = 1234  # the seed of the offline seeded scenarios


class EngineSession:
    """The model under test through the engine (built once per model per session)."""

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
        python: str | None = None,
        wav_root: Path | None = None,
    ) -> None:
        from omnitts.validators.engine.runtime import EngineEnv

        self.tree, self.model, self.release, self.work, self.timeout = tree, model, release, work, timeout
        self.env = EngineEnv.prepare(tree, release, work, placement, python=python)
        # --checkpoint: the given directory as it is (any model of the tree); else the tiny scaffolded model's,
        # built from its source (validators/engine/modeldir.py, which needs the scaffold's shape).
        self.checkpoint = checkpoint is not None
        if checkpoint is not None:
            self.model_dir = Path(checkpoint).resolve()
        else:
            self.model_dir = self.env.model_dir(model, model_dir_cache(tree, model, release))
        self.load_format = "dummy" if dummy_weights else None
        self.request_info = request_info
        self.wav_root = wav_root  # the run folder: WAVs of the offline run's requests go under its wav/
        self.config = json.loads((self.model_dir / "config.json").read_text())
        self._offline: OfflineRun | None = None
        self._parity: dict[Path, object] = {}
        self.server = None

    @property
    def sample_rate(self) -> int:
        return int(self.config.get("sample_rate", 24000))

    def offline(self) -> OfflineRun:
        if self._offline is None:
            texts = list(TEXTS)
            plan = {
                "texts": texts,
                # Compositions: all at once, reversed, and with a duplicate (same text twice in one batch).
                "batches": [texts[:4], list(reversed(texts)), [texts[0], texts[2], texts[0], texts[4]]],
                # the tree's Omni gives up at its own start-up bounds (0.30.0: 600 s) however long this waits
                **omni_timeout_kwargs(self.tree, self.timeout),
                # I5/I3 inside the workers (validators/engine/worker_ext.py), after the scenarios
                "worker_extension_cls": WORKER_EXTENSION,
                "long_text": LONG_TEXT,
                "sequential": SEQUENTIAL,
                # each text streamed as the server streams it (i1 stream checks), and seeded requests (i4 seed)
                "stream": True,
                "seed": SEED,
                **engine_kwargs(self.load_format, self.model_dir),
            }
            example = layout.offline_example(self.tree, self.model)
            if example.is_file():
                plan["example"] = str(example)
            if self.request_info:
                plan["request_info"] = self.request_info
            if self.checkpoint:  # any model of the tree: its requests as the release's serving adapter builds them
                plan.update(serving_model=self.model, release=self.release)
            self._offline = self.env.offline(self.model_dir, plan, self.work / "offline", timeout=self.timeout)
            if self.wav_root is not None:  # what the model said for each request, passing run or not
                for scenario in self._offline.scenarios:
                    for index, request in enumerate(scenario.requests):
                        path = audio.wav_path(self.wav_root, self.model, f"engine_offline_{scenario.name}", str(index))
                        audio.write_wav(path, request.samples, request.sample_rate or 0)
        return self._offline

    def parity(self, capture: Path):
        """The capture's requests through the offline engine (``validators/parity/engine_run.py``), once per capture:
        an ``EngineParityRun`` (the codes the decoder received, waveforms alone and batched, the decoder alone)."""
        from omnitts.validators.parity.engine import run_engine

        capture = Path(capture).resolve()
        if capture not in self._parity:
            # the driver waits for its own (longer) engine start; the parity run is one start and three passes
            timeout = max(1800.0, 3 * self.timeout)
            self._parity[capture] = run_engine(
                self.env, self.model, self.model_dir, capture, self.work / "parity", timeout=timeout
            )
        return self._parity[capture]

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


def model_dir_cache(tree: Path, model: str, release: str) -> Path:
    """Where the model directory of this model's source is cached: keyed by the model folder's content (and the
    builder's), so an edited model gets a new directory and an unchanged one is not rebuilt."""
    from omnitts.knowledge.releases import cache_root
    from omnitts.validators.engine import modeldir

    digest = hashlib.sha256(f"{release}:{model}".encode())
    digest.update(Path(modeldir.__file__).read_bytes())
    folder = layout.model_package(tree, model)
    for path in sorted(folder.rglob("*.py")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return cache_root() / "engine-models" / f"{model}-{digest.hexdigest()[:16]}"
