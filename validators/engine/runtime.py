"""Run the tree's own engine from the test process: environment, model directory, offline runs, the server.

Everything vLLM-Omni runs in the engine environment (``install.engine_python``) as a subprocess whose
``PYTHONPATH`` starts with the tree under test (its ``vllm_omni`` wins over the installed wheel) and omnitts's
overlay (the CPU platform plugin of this checkout). The test process only reads observations (files of the
observation schema) and HTTP answers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from omnitts.knowledge.engine import ENGINE_ENV, serve_timeout_args
from omnitts.validators.backends.http import send
from omnitts.validators.backends.workers import collective_rpc
from omnitts.validators.engine import install, offline
from omnitts.validators.observations.engine import OfflineRun


class EngineError(RuntimeError):
    """The engine could not be prepared or started; the message names the step and the log's tail."""


_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


def _first_traceback(lines: list[str], limit: int = 60) -> list[str]:
    """The log's first traceback, through its exception line: where an engine core dies first, that is the root
    cause the later ``OmniEngineDeadError: ... See stack trace (above)`` points to. Each line keeps the log prefix
    (``(EngineCore pid=..) ERROR ... [core.py:..]``) the ``Traceback`` line has; [] when there is none."""
    start = next((i for i, line in enumerate(lines) if _TRACEBACK in line), None)
    if start is None:
        return []
    # the prefix with its numbers as any numbers: a traceback logged across a second boundary changes its timestamp
    prefix = re.compile(re.sub(r"\d+", r"\\d+", re.escape(lines[start][: lines[start].index(_TRACEBACK)])))
    block = [lines[start]]
    for line in lines[start + 1 : start + limit]:
        block.append(line)
        found = prefix.match(line)
        body = line[found.end() :] if found else line
        if body and not body[0].isspace() and not body.startswith((_TRACEBACK, *_CHAINED)) and body.strip():
            break  # the exception line ends the traceback
    return block


def _tail(text: str, lines: int = 25) -> str:
    """The log's last ``lines`` lines, preceded by its first traceback when that lies above them (a contributor
    needs the engine's own root cause, not only the front end's "engine dead" error)."""
    all_lines = text.strip().splitlines()
    tail = all_lines[-lines:]
    root = _first_traceback(all_lines[: max(len(all_lines) - lines, 0)])
    if not root:
        return "\n".join(tail)
    return "\n".join(["first traceback in the log:", *root, "...", "last lines of the log:", *tail])


@dataclass(frozen=True)
class StagePlacement:
    """Where an engine session puts a model's stages: the GPUs it sees and each stage's ``devices`` override.

    ``visible`` becomes ``CUDA_VISIBLE_DEVICES`` of the session; ``overrides`` are the release's per-stage overrides
    (:func:`omnitts.knowledge.engine.stage_device_overrides`), logical indices into ``visible``, as the release maps
    them (``entrypoints/stage_utils.set_stage_devices``). Empty: the deploy config's own devices.
    """

    visible: str | None = None
    overrides: dict[str, dict[str, str]] = field(default_factory=dict)

    def omni_kwargs(self) -> dict:
        """Keyword arguments of the offline ``Omni(model, ...)``."""
        return {"stage_overrides": self.overrides} if self.overrides else {}

    def serve_args(self) -> list[str]:
        """Arguments of ``vllm-omni serve``."""
        return ["--stage-overrides", json.dumps(self.overrides, sort_keys=True)] if self.overrides else []

    def env(self) -> dict[str, str]:
        return {"CUDA_VISIBLE_DEVICES": self.visible} if self.visible is not None else {}


def stage_placement(
    release: str, deploy: dict | None, num_stages: int, gpus: list[int] | None, *, split_stages: bool = True
) -> StagePlacement:
    """The engine session's placement on ``gpus`` (None: a CPU session, nothing to place).

    The deploy config's per-stage ``devices`` (``knowledge.configs.deploy_stage_devices``) are placed on the
    session's GPUs like the harness places them (``runtime.placement.stage_devices``): a deploy config that spreads
    the stages is followed, one that keeps them together is split over the first two GPUs with ``split_stages``.
    """
    from omnitts.knowledge.configs import deploy_stage_devices
    from omnitts.knowledge.engine import stage_device_overrides
    from omnitts.validators.runtime.placement import stage_devices

    if not gpus:
        return StagePlacement()
    logical = list(range(len(gpus)))  # indices into CUDA_VISIBLE_DEVICES, as the release reads ``devices``
    placed = stage_devices(deploy_stage_devices(deploy, num_stages), logical, home=0, split_stages=split_stages)
    visible = ",".join(str(g) for g in gpus)
    if num_stages < 2 or len(set(placed)) < 2:
        return StagePlacement(visible)
    return StagePlacement(visible, stage_device_overrides(release, [d.split(":", 1)[1] for d in placed]))


@dataclass
class EngineEnv:
    """The engine environment bound to one tree: how to run Python in it."""

    release: str
    python: Path
    tree: Path
    overlay: Path
    placement: StagePlacement = field(default_factory=StagePlacement)

    @classmethod
    def prepare(
        cls, tree: Path, release: str, work: Path, placement: StagePlacement | None = None, *, python: str | None = None
    ) -> EngineEnv:
        python = install.engine_python(release, tree, given=python)  # the one decision: install.engine_python
        overlay = install.overlay(work / "overlay")
        return cls(release, python, Path(tree).resolve(), overlay, placement or StagePlacement())

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("PYTHONHOME", None)
        env.update(ENGINE_ENV)
        env.update(self.placement.env())
        env["PYTHONPATH"] = os.pathsep.join([str(self.tree), str(self.overlay)])
        env.setdefault("OMP_NUM_THREADS", "1")
        return env

    def run(self, args: list[str], *, timeout: float, log: Path) -> subprocess.CompletedProcess:
        with log.open("w") as fh:
            proc = subprocess.run(
                [str(self.python), *args],
                env=self.env(),
                stdout=fh,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                cwd=str(log.parent),
            )
        return proc

    def model_dir(self, model: str, out: Path, *, timeout: float = 300) -> Path:
        """A loadable model directory for a tiny scaffolded model (built once per directory)."""
        if (out / "omnitts_modeldir.json").is_file():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        log = out.parent / f"{out.name}.modeldir.log"
        # Built into a temporary sibling and renamed: a directory that exists is complete (parallel sessions race
        # harmlessly; the loser's copy is dropped).
        partial = Path(tempfile.mkdtemp(prefix=f"{out.name}.", dir=out.parent))
        proc = self.run(
            [
                "-m",
                "omnitts.validators.engine.modeldir",
                "--tree",
                str(self.tree),
                "--model",
                model,
                "--out",
                str(partial),
            ],
            timeout=timeout,
            log=log,
        )
        if proc.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise EngineError(f"building the model directory of {model} failed:\n{_tail(log.read_text())}")
        try:
            partial.rename(out)
        except OSError:
            shutil.rmtree(partial, ignore_errors=True)
        return out

    def offline(self, model_dir: Path, plan: dict, out: Path, *, timeout: float = 600) -> OfflineRun:
        """Run the offline ``Omni`` on ``plan`` (see ``offline.py``): what it observed (``log``: the log's tail, where
        it failed)."""
        out.mkdir(parents=True, exist_ok=True)
        plan = {**plan, **self.placement.omni_kwargs()}  # offline.py passes stage_overrides on to Omni(...)
        (out / "plan.json").write_text(json.dumps(plan))
        log = out / "offline.log"
        try:
            self.run(
                [
                    "-m",
                    "omnitts.validators.engine.offline",
                    "--model-dir",
                    str(model_dir),
                    "--plan",
                    str(out / "plan.json"),
                    "--out",
                    str(out),
                ],
                timeout=timeout,
                log=log,
            )
        except subprocess.TimeoutExpired:
            return OfflineRun(error=f"offline Omni did not finish in {timeout:.0f} s", log=_tail(log.read_text()))
        found = offline.read(out)
        if found is None:
            return OfflineRun(error="offline Omni died without a result", log=_tail(log.read_text()))
        return dataclasses.replace(found, log=_tail(log.read_text())) if found.error else found


_SERVE_FLAGS = {"load_format": "--load-format", "deploy_config": "--deploy-config"}


def serve_args(engine_kwargs: dict) -> list[str]:
    """``vllm-omni serve`` arguments of the engine arguments the offline ``Omni(...)`` gets as keywords."""
    unknown = set(engine_kwargs) - set(_SERVE_FLAGS)
    if unknown:
        raise ValueError(f"serve_args: no serve flag for {sorted(unknown)}")
    return [arg for key, value in engine_kwargs.items() for arg in (_SERVE_FLAGS[key], str(value))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    """``vllm-omni serve DIR --omni`` of the tree, on 127.0.0.1 and a free port; ``stop()`` always ends it.

    With ``worker_extension`` the engine's workers get that class (``--worker-extension-cls``) and the server
    vLLM's development endpoints (``VLLM_SERVER_DEV_MODE=1``, bound to 127.0.0.1 only), so that the test reaches
    the workers through ``POST /collective_rpc`` (:meth:`rpc`); its ``omnitts_install`` runs before any request."""

    env: EngineEnv
    model_dir: Path
    log: Path
    worker_extension: str | None = None
    engine_kwargs: dict = field(default_factory=dict)  # load_format, deploy_config (pytest_options.engine_kwargs)
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    startup_s: float | None = None
    installed: list | None = None
    startup_timeout: float | None = None  # start()'s wait: the server's own start-up bounds are raised to it

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The ``vllm-omni serve`` command line (``--worker-extension-cls`` included when set)."""
        cmd = [
            str(self.env.python),
            "-c",
            "import sys; from vllm_omni.entrypoints.cli.main import main; sys.argv[0] = 'vllm-omni'; sys.exit(main())",
            "serve",
            str(self.model_dir),
            "--omni",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *self.env.placement.serve_args(),
            *serve_args(self.engine_kwargs),
            *(serve_timeout_args(self.env.tree, self.startup_timeout) if self.startup_timeout else []),
        ]
        if self.worker_extension:
            cmd += ["--worker-extension-cls", self.worker_extension]
        return cmd

    def start(self, *, timeout: float = 300) -> Server:
        # vllm-omni serve gives up at its own start-up bounds (0.30.0: 600 s) however long this waits: raise them too,
        # since engine starts on one machine queue behind each other (the device init lock)
        self.startup_timeout = timeout
        cmd = self.command()
        env = self.env.env()
        if self.worker_extension:
            env["VLLM_SERVER_DEV_MODE"] = "1"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        fh = self.log.open("w")
        started = time.monotonic()
        # Own process group: stop() ends the server and every engine process it spawned.
        self.proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=str(self.log.parent),
            start_new_session=True,
        )
        fh.close()
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise EngineError(f"vllm-omni serve exited with {self.proc.returncode}:\n{_tail(self.log.read_text())}")
            if send(self.url, "GET", "/health", timeout=2).ok:
                self.startup_s = round(time.monotonic() - started, 2)
                if self.worker_extension:
                    self.installed = self.rpc("omnitts_install")
                return self
            time.sleep(1.0)
        self.stop()
        raise EngineError(f"vllm-omni serve not healthy after {timeout:.0f} s:\n{_tail(self.log.read_text())}")

    def rpc(self, method: str, *, timeout: float = 120) -> list:
        """``method`` of the worker extension on every worker (vLLM's ``POST /collective_rpc``): one result per
        worker, stage by stage."""
        try:
            return collective_rpc(self.url, method, timeout)
        except RuntimeError as exc:
            raise EngineError(str(exc)) from exc

    def stop(self, *, grace: float = 20) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        # Engine workers are in the same session; make sure none outlives the server.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
