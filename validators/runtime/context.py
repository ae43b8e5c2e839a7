"""The one per-model context of a pytest process, whatever the tier: options, the subject and its cached harness runs,
the engine session (``--engine offline|server``), and where the audio a verdict names is written."""

from __future__ import annotations

import contextlib
import copy
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from omnitts.knowledge.runner import RunnerContract
from omnitts.validators.runtime import audio
from omnitts.validators.runtime.consolidation import real_state_factory
from omnitts.validators.runtime.harness import ContractError, Harness, ModelError, RunResult
from omnitts.validators.runtime.loaders import LoadError, load_subject
from omnitts.validators.runtime.subject import RequestPlan, RuntimeSubject
from omnitts.validators.runtime.timeouts import CheckTimeout, deadline


class CheckFailure(AssertionError):
    """A check failed for a reason the check names (message is what the user reads)."""


@dataclass
class EngineOptions:
    """``--engine offline|server``: how the tree's own engine runs the model."""

    tier: str = "harness"
    release: str | None = None  # default: the tree's
    timeout: float = 600.0
    checkpoint: Path | None = None
    dummy_weights: bool = False
    request_info: dict | None = None
    placement_for: Any = None  # model name -> its StagePlacement (validators/engine/runtime.py)
    reference: Path | None = None  # --reference CAPTURE: the parity checks compare with it
    python: str | None = None  # --engine-python (else install.engine_python decides)


@dataclass
class Options:
    device: str = "cpu"
    omni_root: str | None = None
    release: str | None = None
    out_dir: Path = Path("omnitts-out")
    timeout: float = 60.0
    require_real: bool = False
    placement: Any = None  # the worker's WorkerPlacement on CUDA runs (validators/runtime/placement.py)
    catalogs: tuple = ()  # the model catalogs --model names come from (handed in by the plugin)
    engine: EngineOptions = field(default_factory=EngineOptions)


@dataclass
class ModelContext:
    name: str
    options: Options
    _subject: RuntimeSubject | None = None
    _load_error: str | None = None
    _load_reported: bool = False
    _reported: set[str] = field(default_factory=set)
    _runs: dict[str, Any] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    hung: str | None = None
    _session: Any = None  # the EngineSession (engine tiers)
    backend: Any = None  # the tier's backend observing this model (validators/backends)

    # -- subject ---------------------------------------------------------------------------------
    @property
    def subject(self) -> RuntimeSubject:
        if self._subject is None and self._load_error is None:
            try:
                self._subject = load_subject(
                    self.name, self.options.catalogs, self.options.omni_root, self.options.release, self.options.device
                )
            except LoadError as exc:
                self._load_error = str(exc)
            except Exception as exc:  # noqa: BLE001 - import errors in model code are the model's failure
                self._load_error = f"loading {self.name!r} raised {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        if self._load_error is not None:
            if self._load_reported:  # the first check that needed the model carries the whole message
                first = self._load_error.strip().splitlines()[0]
                raise CheckFailure(f"not run: model {self.name!r} could not be loaded ({first[:200]})")
            self._load_reported = True
            raise CheckFailure(f"cannot load model {self.name!r}: {self._load_error}")
        return self._subject

    @property
    def contract(self) -> RunnerContract:
        return self.subject.contract()

    def consolidation(self):
        """(factory or None, description): the release's own function in the real tier, else ours."""
        key = "__consolidation__"
        if key not in self._runs and self.subject.consolidation_era:
            era = self.subject.consolidation_era
            self._runs[key] = (None, f"omnitts era-{era} re-implementation (harness variation of this subject)")
        if key not in self._runs:
            factory, note = real_state_factory(self.contract.version)
            if factory is None:
                if self.options.require_real or self.subject.kind == "tree":
                    self._runs[key] = (None, f"REAL-TIER-UNAVAILABLE: {note}")
                else:
                    era = self.contract.consolidation_era
                    self._runs[key] = (None, f"omnitts era-{era} re-implementation ({note})")
            else:
                self._runs[key] = (factory, note)
        return self._runs[key]

    def stage_devices(self) -> list[str] | None:
        """Each stage's device on a CUDA run (None on CPU): the deploy config's per-stage ``devices`` placed on this
        worker's GPUs (:meth:`WorkerPlacement.stage_devices`; two stages on two GPUs with ``--stage-devices
        split``)."""
        key = "__stage_devices__"
        if key not in self._runs:
            placement = self.options.placement
            if placement is None or not self.options.device.startswith("cuda"):
                self._runs[key] = None
            else:
                from omnitts.knowledge.configs import deploy_stage_devices
                from omnitts.validators.runtime.placement import PlacementError

                sub = self.subject
                try:
                    self._runs[key] = placement.stage_devices(
                        deploy_stage_devices(sub.extra.get("deploy"), len(sub.stages))
                    )
                except PlacementError as exc:
                    self._runs[key] = CheckFailure(f"{self.name}: stage placement: {exc}")
        found = self._runs[key]
        if isinstance(found, CheckFailure):
            raise found
        return found

    # -- running ---------------------------------------------------------------------------------
    def harness(self, **kw) -> Harness:
        if self.hung is not None:
            raise_failure(CheckFailure(f"not run: the model hung earlier ({self.hung}); see that check's report"), "")
        factory, note = self.consolidation()
        if note.startswith("REAL-TIER-UNAVAILABLE"):
            raise CheckFailure(f"the real-vLLM tier is needed for {self.name!r} but {note.split(': ', 1)[1]}")
        if kw.get("models") is None:  # models a check built itself stay where it put them (one device)
            kw.setdefault("stage_devices", self.stage_devices())
        return Harness(
            self.subject, device=self.options.device, consolidation_factory=factory, consolidation_source=note, **kw
        )

    def run(self, key: str, plans: list[RequestPlan], **harness_kw) -> RunResult:
        """Run a scenario once per process; a failure is cached and re-raised for every check that needs it."""
        if key not in self._runs:
            try:
                with deadline(self.options.timeout, f"{self.name}: scenario {key}"):
                    self._runs[key] = self.harness(**harness_kw).run(copy.deepcopy(plans), key)
            except (ModelError, ContractError, CheckTimeout, CheckFailure) as exc:
                if isinstance(exc, CheckTimeout) and self.hung is None:
                    self.hung = f"scenario {key!r} exceeded {self.options.timeout:g} s"
                self._runs[key] = exc
        res = self._runs[key]
        if isinstance(res, BaseException):
            if key in self._reported:  # one full report per failed scenario; later checks point to it
                first = str(res).strip().splitlines()[0] if str(res).strip() else type(res).__name__
                raise_failure(
                    CheckFailure(f"not run: scenario {key!r} failed in an earlier check ({first[:200]})"), key
                )
            self._reported.add(key)
            raise_failure(res, f"scenario {key!r}")
        return res

    @contextlib.contextmanager
    def guard(self, what: str, seconds: float | None = None):
        """Deadline + failure translation for model work done directly by a check."""
        if self.hung is not None:
            raise_failure(CheckFailure(f"not run: the model hung earlier ({self.hung}); see that check's report"), what)
        try:
            with deadline(seconds or self.options.timeout, f"{self.name}: {what}"):
                yield
        except CheckTimeout as exc:
            if self.hung is None:
                self.hung = f"{what} exceeded {seconds or self.options.timeout:g} s"
            raise_failure(exc, what)
        except (ModelError, ContractError, CheckFailure) as exc:
            raise_failure(exc, what)

    def composition(self, name: str) -> RunResult:
        """One of :func:`scenarios.compositions`, run once and shared by I4, I5, perf and the chunk check."""
        from omnitts.validators.runtime.scenarios import compositions

        plans, kw = compositions(self.subject)[name]
        return self.run(f"composition:{name}", plans, check_aliasing=True, **kw)

    def solo_runs(self) -> dict[str, RunResult]:
        out = {}
        for p in self.subject.prompts:
            out[p.ext_id] = self.run(f"solo:{p.ext_id}", [replace(p, arrive_step=0, abort_step=None)])
        if "__served_wavs__" not in self._reported:  # what the model says for each prompt, passing run or not
            self._reported.add("__served_wavs__")
            for run in out.values():
                self.write_run("served", run)
        return out

    def solo_audio(self) -> dict[str, torch.Tensor]:
        return {ext: r.requests[ext].stream_audio for ext, r in self.solo_runs().items()}

    # -- the engine tiers -------------------------------------------------------------------------
    def engine_session(self):
        """The model through the tree's own engine (``--engine offline|server``), built on first use."""
        if self._session is None:
            from omnitts.validators.engine.session import EngineSession
            from omnitts.validators.runtime.results import engine_dir

            engine = self.options.engine
            if not self.options.omni_root:
                raise CheckFailure("--engine offline/server runs the tree's own engine: pass --omni-root DIR")
            work = engine_dir(self.options.out_dir, self.name)  # the run folder keeps the engine's logs
            try:
                self._session = EngineSession(
                    Path(self.options.omni_root).resolve(),
                    self.name,
                    engine.release,
                    work,
                    engine.timeout,
                    engine.placement_for(self.name) if engine.placement_for else None,
                    checkpoint=engine.checkpoint,
                    dummy_weights=engine.dummy_weights,
                    request_info=engine.request_info,
                    python=engine.python,
                    wav_root=self.options.out_dir,
                )
            except Exception as exc:  # fail closed, with the step and the log's tail
                raise CheckFailure(f"engine tier for {self.name}: {exc}") from exc
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()

    # -- artifacts -------------------------------------------------------------------------------
    def write_audio(self, check: str, name: str, samples, sample_rate: int | None = None) -> Path:
        sr = sample_rate or (self._subject.sample_rate if self._subject else None) or 16000
        path = audio.wav_path(self.options.out_dir, self.name, check, name)
        audio.write_wav(path, samples, sr)
        self.written.append(path)
        return path

    def write_run(self, check: str, run: RunResult, suffix: str = "") -> dict[str, Path]:
        return {
            ext: self.write_audio(check, f"{ext}{suffix}", res.stream_audio, res.sample_rate)
            for ext, res in run.requests.items()
        }


def raise_failure(exc: BaseException, what: str):
    import pytest

    if isinstance(exc, ModelError):
        pytest.fail(f"{what}: the model raised.\n{exc}\n\n--- model traceback ---\n{exc.tb}", pytrace=False)
    if isinstance(exc, CheckTimeout):
        # the stack taken while the model was stuck; else where the soft stop found it
        where = exc.stack or "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        pytest.fail(f"{what}: HANG: {exc}\n\n--- stack of the stuck call ---\n{where}", pytrace=False)
    if isinstance(exc, ContractError):
        pytest.fail(f"{what}: forward-contract violation: {exc}", pytrace=False)
    if isinstance(exc, CheckFailure):
        pytest.fail(str(exc), pytrace=False)
    raise exc
