"""The model catalog: every reference model and mutant a validator can be pointed at.

``list_models()`` names the correct models first, then the mutants (``<model>@<bug>``); ``get_subject(name)``
returns the catalog entry (``Subject``: its files, patches and expected checks, for static rules and the mutant
matrix), and ``Subject.runtime(device)`` the validators' subject type (:class:`RuntimeSubject`) that the one runner,
the harness (:mod:`omnitts.validators.runtime.harness`), steps; ``Subject.run(texts)`` serves texts through it.
Mutant sources are materialised once per content hash under ``$OMNITTS_CACHE`` (default ``~/.cache/omnitts``) and
imported from there under ``omnitts_mutants.<model>__<bug>``; nothing here needs cookiecutter, libcst or soundfile.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import torch

from omnitts.knowledge.runner import REFERENCE_RELEASE
from omnitts.reference_models import hf_reference
from omnitts.reference_models.mutants import MUTANTS, Mutant
from omnitts.validators import checkids
from omnitts.validators.runtime.harness import Harness, RequestResult
from omnitts.validators.runtime.loaders import default_prompts, template_consumer
from omnitts.validators.runtime.subject import RequestPlan, RuntimeSubject, StageSpec

REFERENCE_DIR = Path(__file__).resolve().parent
MUTANT_ROOT_PACKAGE = "omnitts_mutants"

# model -> (pattern, stage modules and classes in stage order, config module and class)
_MODELS: dict[str, dict[str, Any]] = {
    "ref_two_stage": {
        "pattern": "two-stage",
        "stages": (
            ("ref_two_stage_talker", "RefTwoStageTalkerForConditionalGeneration"),
            ("ref_two_stage_code2wav", "RefTwoStageCode2Wav"),
        ),
        "config": ("configuration_ref_two_stage", "RefTwoStageConfig"),
        "host_syncs_per_request_step": 0,
        "frames_key": "codes.audio",  # stage 0: one [1, K] frame per step, all -1 on the stop step
    },
    "ref_single_stage": {
        "pattern": "single-stage",
        "stages": (("modeling_ref_single_stage", "RefSingleStageForGeneration"),),
        "config": ("configuration_ref_single_stage", "RefSingleStageConfig"),
        # the generator reads its chunk's stop flags back once (after the frame loop): it must know where to stop
        "host_syncs_per_request_step": 1,
        "frames_key": "codes.audio",  # [n, K] per step: a chunk of up to stream_chunk_frames frames
    },
    "ref_native_ar": {
        "pattern": "native-ar",
        "stages": (("modeling_ref_native_ar", "RefNativeArForConditionalGeneration"),),
        "config": ("configuration_ref_native_ar", "RefNativeArConfig"),
        "host_syncs_per_request_step": 0,
        # [patch_size, latent_dim] per step, emitted one step after postprocess computed it (none at prefill)
        "frames_key": "latent",
    },
}

# the runtime checks a correct model must pass (checkids vocabulary)
CORRECT_CHECKS = (
    checkids.I1_MATCHES_REFERENCE,
    *checkids.I1_STREAMING,
    checkids.I1_MODEL_OUTPUTS_EVERY_STEP,
    checkids.I3_HOST_SYNCS,
    checkids.I4_CONCURRENCY,
    *checkids.I5_STATE,
    checkids.I5_OUTPUTS_NOT_ALIASED,
)

# the texts a validator's scenarios serve (one RequestPlan each)
REFERENCE_TEXTS = ("Hi.", "Hello there.", "Streaming == offline.", "Four at once!", "A fifth, longer request.")

# a mutant's harness variation (Mutant.consolidation) -> the consolidation era the harness runs
CONSOLIDATION_ERAS = {"v0.20": None, "skip-audio": "0.14"}


@dataclass(frozen=True)
class Subject:
    """One model under validation: a correct reference model or a mutant of one.

    Stage classes are in stage order (AR stage first); the last stage emits the audio. ``source_files`` are the
    files of this subject (the mutated copies for a mutant): the model package, the stage input processor and the
    deploy config, for static rules. ``expected_checks`` are the checks that must flag a mutant (for a correct model:
    the checks it must pass); ``static_rule_family`` is set when, on a CPU-only machine, only static rules see it.
    ``host_syncs_per_request_step`` is the host-read budget of the correct model (the generator reads its stop
    flags once per chunk). ``frames_key`` is the payload key whose rows count the codec/latent frames behind each
    step's audio (``codes.audio`` rows, ``latent`` rows): audio samples = frames x ``config.hop_length``.
    """

    name: str
    model: str
    pattern: str
    bug: str | None
    description: str | None
    reproduces: str | None
    root: Path
    package: str
    stage_specs: tuple[tuple[str, str], ...]
    config_spec: tuple[str, str]
    processor_module: str | None
    deploy_path: Path
    deploy_yaml: str
    deploy_config: dict[str, Any]
    consolidation: str
    source_files: tuple[Path, ...]
    expected_checks: tuple[str, ...]
    static_rule_family: str | None
    host_syncs_per_request_step: int
    frames_key: str
    patched_files: tuple[str, ...] = field(default=())
    release: str | None = None  # the release whose runner contract it runs under (None: REFERENCE_RELEASE)

    @property
    def is_mutant(self) -> bool:
        return self.bug is not None

    # Imports are lazy: a mutant whose module cannot be imported (e.g. an optional dependency imported at module
    # top on a machine without it) is still listed and linted; the import error surfaces where it is used.

    @cached_property
    def stage_classes(self) -> tuple[type, ...]:
        """Stage classes in stage order (AR stage first, the audio stage last)."""
        return tuple(getattr(importlib.import_module(f"{self.package}.{m}"), c) for m, c in self.stage_specs)

    @cached_property
    def config_class(self) -> type:
        module, cls = self.config_spec
        return getattr(importlib.import_module(f"{self.package}.{module}"), cls)

    @cached_property
    def processor(self) -> types.ModuleType | None:
        """The stage input processor module (two-stage): ``talker2code2wav`` and ``talker2code2wav_async_chunk``."""
        return importlib.import_module(self.processor_module) if self.processor_module else None

    def make_config(self, **overrides: Any) -> Any:
        """The model's config (tiny defaults; weights are drawn from ``seed``)."""
        return self.config_class(**overrides)

    def build(self, device: str | torch.device = "cpu", config: Any | None = None) -> tuple[torch.nn.Module, ...]:
        """Instantiate every stage as the harness does (``Cls(config=cfg)``), on ``device``, in eval mode."""
        config = config if config is not None else self.make_config()
        return tuple(cls(config=config).to(device).eval() for cls in self.stage_classes)

    def reference(self, device: str | torch.device = "cpu", config: Any | None = None) -> Any:
        """The HF-style reference of the base (correct) model; ``.generate(text)`` returns a ``ReferenceOutput``."""
        return hf_reference.make_reference(self.model, config=config, device=device)

    def generate(self, text: str, device: str | torch.device = "cpu") -> hf_reference.ReferenceOutput:
        return self.reference(device).generate(text)

    def stage_deploy(self, stage_id: int) -> dict[str, Any]:
        for stage in self.deploy_config.get("stages") or []:
            if stage.get("stage_id") == stage_id:
                return stage
        return {}

    def runtime(
        self, device: str | torch.device = "cpu", *, release: str | None = None, model_runner: str = "v1"
    ) -> RuntimeSubject:
        """This model as the validators' subject: stage specs, prompts, the stage input processor, deploy limits,
        the HF-style reference and the example's consumer; ``release``/``model_runner`` pick the runner contract
        (``model_runner="v2"`` is 0.30's Model Runner V2, which writes ``req_id``)."""
        config = self.make_config()
        classes = list(self.stage_classes)
        two = len(classes) > 1
        stages = [
            StageSpec(
                stage_id=i,
                model_stage=str(getattr(cls, "model_stage", cls.__name__)),
                execution="ar" if i == 0 else "generation",
                factory=(lambda c=cls, cfg=config: c(config=cfg)),
                engine_output_type="latent" if two and i == 0 else "audio",
                final_output=(i == len(classes) - 1),
                cls=cls,
                config=config,
            )
            for i, cls in enumerate(classes)
        ]
        extra: dict[str, Any] = {}
        for connector in (self.deploy_config.get("connectors") or {}).values():
            extra.update((connector or {}).get("extra") or {})
        if self.consolidation not in CONSOLIDATION_ERAS:
            raise ValueError(f"{self.name}: unknown consolidation variation {self.consolidation!r}")
        ref_cache: dict[str, Any] = {}

        def reference(plan: RequestPlan):
            if "obj" not in ref_cache:
                ref_cache["obj"] = self.reference(device=device)
            text = plan.additional_information.get("text", [""])
            return ref_cache["obj"].generate(text[0] if isinstance(text, list) else str(text)).waveform

        consumer, origin = template_consumer()
        processor = self.processor
        return RuntimeSubject(
            name=self.name,
            pattern=self.pattern,
            release=release or self.release or REFERENCE_RELEASE,
            model_runner=model_runner,
            stages=stages,
            prompts=default_prompts(config, REFERENCE_TEXTS),
            sample_rate=int(config.sample_rate),
            hop_length=int(config.hop_length),
            eos_token_id=int(config.eos_token_id),
            async_chunk_fn=getattr(processor, "talker2code2wav_async_chunk", None),
            sync_fn=getattr(processor, "talker2code2wav", None),
            connector_extra=extra,
            reference=reference,
            consumer=consumer,
            consumer_origin=origin,
            source_files=list(self.source_files),
            model_files=[p for p in self.source_files if p.suffix == ".py"],
            kind="mutant" if self.is_mutant else "reference",
            expected_failure=(str(self.bug), ",".join(self.expected_checks)) if self.is_mutant else None,
            eos_step_emits_audio=self.pattern != "two-stage",
            max_num_seqs=tuple(
                int(self.stage_deploy(i)["max_num_seqs"]) if "max_num_seqs" in self.stage_deploy(i) else None
                for i in range(len(classes))
            ),
            sync_budget_per_request_step=self.host_syncs_per_request_step,
            consolidation_era=CONSOLIDATION_ERAS[self.consolidation],
            description=self.description or "",
            extra={
                "deploy": self.deploy_config,
                "package": self.package,
                "root": str(self.root),
                "expected_checks": self.expected_checks,
                "static_rule_family": self.static_rule_family,
                "reproduces": self.reproduces,
            },
        )

    @property
    def async_chunk(self) -> bool:
        """The deploy config's ``async_chunk`` (two-stage: stage 0 streams windows to the decoder)."""
        return bool(self.deploy_config.get("async_chunk", False))

    def plans(
        self,
        texts: list[str],
        *,
        arrival_steps: list[int] | None = None,
        abort_steps: dict[int, int] | None = None,
        max_tokens: int = 512,
    ) -> list[RequestPlan]:
        """One request per text (``req-<i>``), arriving and aborted at the given engine steps."""
        encode = self.make_config().encode_text
        return [
            RequestPlan(
                ext_id=f"req-{i}",
                prompt_token_ids=list(encode(text)),
                additional_information={"text": [text]},
                max_tokens=max_tokens,
                arrive_step=(arrival_steps or [0] * len(texts))[i],
                abort_step=(abort_steps or {}).get(i),
            )
            for i, text in enumerate(texts)
        ]

    def run(
        self,
        texts: list[str],
        device: str | torch.device = "cpu",
        *,
        arrival_steps: list[int] | None = None,
        abort_steps: dict[int, int] | None = None,
        stages: tuple[torch.nn.Module, ...] | None = None,
        spy: Any = None,
        async_chunk: bool | None = None,
        decoder_max_num_seqs: int | None = None,
        max_tokens: int = 512,
        release: str | None = None,
        model_runner: str = "v1",
    ) -> list[RequestResult]:
        """Serve ``texts`` through the harness (concurrently, staggered by ``arrival_steps``); one
        :class:`RequestResult` per text, in order. ``spy`` (a ``SyncSpy``) is armed around every model call."""
        subject = self.runtime(device, release=release, model_runner=model_runner)
        engine = Harness(
            subject,
            device=str(device),
            models=list(stages) if stages is not None else None,
            async_chunk=self.async_chunk if async_chunk is None else async_chunk,
            gen_max_batch=decoder_max_num_seqs,
            spy=spy,
        )
        engine.spy_active = spy is not None
        plans = self.plans(texts, arrival_steps=arrival_steps, abort_steps=abort_steps, max_tokens=max_tokens)
        return engine.run(plans, "catalog").in_order(plans)


def list_models() -> list[str]:
    """Correct models first, then mutants (``<model>@<bug>``), each group in declaration order."""
    return [*_MODELS, *MUTANTS]


def get_subject(name: str) -> Subject:
    """The catalog entry called ``name`` (``ref_two_stage``, ``ref_two_stage@replay``, ...)."""
    if name in _MODELS:
        return _subject(name, None)
    if name in MUTANTS:
        return _subject(MUTANTS[name].model, MUTANTS[name])
    raise KeyError(f"unknown model {name!r}; known: {', '.join(list_models())}")


def base_files(model: str) -> dict[str, bytes]:
    """The committed render of a correct model, ``{path relative to its root: bytes}``."""
    root = REFERENCE_DIR / model
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def apply_patches(files: dict[str, bytes], patches: tuple[Any, ...]) -> dict[str, bytes]:
    """Apply declared patches; each ``old`` snippet must occur exactly once in its file."""
    out = dict(files)
    for patch in patches:
        text = out[patch.file].decode("utf-8")
        count = text.count(patch.old)
        if count != 1:
            raise ValueError(f"patch for {patch.file} matches {count} times (must be exactly once): {patch.old!r}")
        out[patch.file] = text.replace(patch.old, patch.new).encode("utf-8")
    return out


def cache_dir() -> Path:
    return Path(os.environ.get("OMNITTS_CACHE") or Path.home() / ".cache" / "omnitts")


def _mutant_package_name(mutant: Mutant) -> str:
    return f"{mutant.model}__{mutant.bug.replace('-', '_')}"


@cache
def _materialise(name: str) -> tuple[Path, str]:
    """Write a mutant's sources under the cache dir (once per content hash); returns (root dir, package prefix)."""
    mutant = MUTANTS[name]
    files = apply_patches(base_files(mutant.model), mutant.patches)
    digest = hashlib.sha256(b"".join(k.encode() + b"\0" + v for k, v in sorted(files.items()))).hexdigest()[:16]
    package = _mutant_package_name(mutant)
    root = cache_dir() / "mutants" / f"{package}-{digest}"
    if not root.is_dir():
        root.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{package}-", dir=root.parent))
        for rel, data in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        try:
            staging.rename(root)
        except OSError:  # another process got there first; its copy has the same content
            shutil.rmtree(staging, ignore_errors=True)
    prefix = f"{MUTANT_ROOT_PACKAGE}.{package}"
    if MUTANT_ROOT_PACKAGE not in sys.modules:
        top = types.ModuleType(MUTANT_ROOT_PACKAGE)
        top.__path__ = []
        sys.modules[MUTANT_ROOT_PACKAGE] = top
    pkg = types.ModuleType(prefix)
    pkg.__path__ = [str(root)]
    sys.modules[prefix] = pkg
    return root, prefix


def _load_yaml(text: str) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(text) or {}


@cache
def _subject(model: str, mutant: Mutant | None) -> Subject:
    spec = _MODELS[model]
    if mutant is None:
        root, prefix = REFERENCE_DIR / model, f"omnitts.reference_models.{model}"
    else:
        root, prefix = _materialise(mutant.name)
    package = f"{prefix}.models.{model}"
    deploy_path = root / "deploy" / f"{model}.yaml"
    deploy_yaml = deploy_path.read_text(encoding="utf-8")
    sources = tuple(
        path
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".yaml")
    )
    return Subject(
        name=model if mutant is None else mutant.name,
        model=model,
        pattern=spec["pattern"],
        bug=None if mutant is None else mutant.bug,
        description=None if mutant is None else mutant.description,
        reproduces=None if mutant is None else mutant.reproduces,
        root=root,
        package=package,
        stage_specs=tuple(spec["stages"]),
        config_spec=spec["config"],
        processor_module=f"{prefix}.stage_input_processors.{model}" if spec["pattern"] == "two-stage" else None,
        deploy_path=deploy_path,
        deploy_yaml=deploy_yaml,
        deploy_config=_load_yaml(deploy_yaml),
        consolidation="v0.20" if mutant is None else mutant.consolidation,
        source_files=sources,
        expected_checks=CORRECT_CHECKS if mutant is None else mutant.checks,
        static_rule_family=None if mutant is None else mutant.static_rule_family,
        host_syncs_per_request_step=spec["host_syncs_per_request_step"],
        frames_key=spec["frames_key"],
        patched_files=() if mutant is None else tuple(sorted({p.file for p in mutant.patches})),
        release=None if mutant is None else mutant.release,
    )
