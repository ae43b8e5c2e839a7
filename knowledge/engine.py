"""What the engine tier needs to know about a vLLM-Omni release: which vLLM build runs it on a CPU-only
machine, which extra packages its offline and serving paths import, which CUDA-only PyPI builds break a CPU
torch, and which vLLM-Omni runner classes the CPU platform reuses.

Measured facts (../shared/research/real_engine_facts.md); every other module reads them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omnitts.knowledge.pairing import pairing, vllm_requirement

#: Entry-point group from which vLLM-Omni (0.30+) loads out-of-tree OmniPlatform plugins.
OMNI_PLATFORM_PLUGINS_GROUP = "vllm_omni.platform_plugins"


@dataclass(frozen=True)
class EngineRecipe:
    """How to build a CPU engine environment for one vLLM-Omni release."""

    release: str
    torch: str  # the torch the CPU vLLM build pins
    vllm: str  # pip requirement of the CPU vLLM build
    # Pins that replace what the vLLM build pulls in, because vllm-omni needs older ones.
    repins: tuple[str, ...]
    # vllm-omni's own dependencies that its offline and serving paths import, installed without theirs.
    omni_deps: tuple[str, ...]
    # CUDA-only builds that PyPI resolves next to a CPU torch and that must be neutralised.
    uninstall: tuple[str, ...] = ("torchcodec",)
    hide_c_extensions: tuple[str, ...] = ("torchaudio",)
    guard_fake_ops: tuple[str, ...] = ("torchvision",)
    # vLLM-Omni classes that the CPU platform puts over vLLM's CPU runner (module, class).
    ar_runner: tuple[str, str] = ("vllm_omni.worker.gpu_ar_model_runner", "GPUARModelRunner")
    generation_runner: tuple[str, str] = ("vllm_omni.worker.gpu_generation_model_runner", "GPUGenerationModelRunner")
    worker_mixin: tuple[str, str] = ("vllm_omni.worker.mixins", "OmniWorkerMixin")
    env: dict[str, str] = field(default_factory=dict)
    # What runs in the environment beside the engine: the tree's own tests (the ones `new` generates: pytest) and
    # omnitts's harness tier for a tree's model (its static rules parse with libcst; omnitts itself comes from the
    # overlay). Installed onto a ready environment without rebuilding it, so they are not part of the fingerprint.
    tools: tuple[str, ...] = ("pytest==9.2.0", "libcst==1.9.0")
    # Disk the built environment takes (measured: 3.7 GiB for 0.30.0, torch and triton 1.7 of it), checked
    # before the build starts.
    disk_gib: float = 4.0

    @property
    def fingerprint(self) -> str:
        """Changes whenever the recipe does, so a cached environment built from an older one is rebuilt."""
        return repr(
            (
                self.release,
                self.torch,
                self.vllm,
                self.repins,
                self.omni_deps,
                self.uninstall,
                self.hide_c_extensions,
                self.guard_fake_ops,
                _NEUTRALISER_VERSION,
            )
        )


_NEUTRALISER_VERSION = 1

# Environment the CPU engine runs under (spawned workers; a small KV cache; vLLM's CPU CI defaults).
ENGINE_ENV = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1"}

_RECIPES: dict[str, EngineRecipe] = {
    "0.30.0": EngineRecipe(
        release="0.30.0",
        torch="torch==2.13.0",
        vllm=vllm_requirement("0.30.0", cpu=True),
        repins=("transformers==5.14.1", "tokenizers==0.22.2"),
        omni_deps=(
            "aenum==3.1.16",
            "omegaconf==2.4.0",
            "prettytable==3.18.0",
            "wcwidth",
            "janus==2.0.0",
            "diffusers==0.40.0",
            "soundfile==0.14.0",
            "av==18.1.0",
        ),
        env=dict(ENGINE_ENV),
    ),
}


class NoCpuEngine(LookupError):
    """The release has no vLLM build that installs on a CPU-only machine."""


def recipe(release: str) -> EngineRecipe:
    """The CPU engine recipe of ``release``; NoCpuEngine with the reason where there is none."""
    found = _RECIPES.get(release)
    if found is None:
        why = pairing(release).note or "no CPU engine recipe measured for it"
        raise NoCpuEngine(
            f"vLLM-Omni {release} has no CPU engine tier ({why}); releases with one: {', '.join(sorted(_RECIPES))}"
        )
    return found


def cpu_engine_releases() -> tuple[str, ...]:
    return tuple(sorted(_RECIPES))


def stage_device_overrides(release: str, devices: list[str | None]) -> dict[str, dict[str, str]]:
    """Per-stage ``devices`` as the release takes them from the caller: ``{"0": {"devices": "0"}, "1": {...}}``.

    0.30.0: ``Omni(model, stage_overrides=...)`` and ``vllm-omni serve --stage-overrides JSON``
    (``entrypoints/utils.parse_stage_overrides``: keys are stage ids as strings, values objects);
    ``config/resolver._flatten_stage_overrides`` turns them into ``stage_<id>_devices``, which
    ``config/stage_config.py`` puts into the stage's ``runtime.devices`` over the deploy YAML's value. Stages whose
    device is None keep the deploy config's.
    """
    recipe(release)  # only releases whose engine tier runs here; NoCpuEngine says why not
    return {str(stage): {"devices": str(value)} for stage, value in enumerate(devices) if value is not None}


# `vllm-omni serve`'s own bounds on the engine's start-up (0.30.0 `entrypoints/cli/serve.py`: `--init-timeout`, all
# stages, default 600 s; `--stage-init-timeout`, one stage, default 300 s). Engine starts on one machine queue behind
# each other (the device init lock), so a caller that waits longer must raise these too, or the server gives up first.
SERVE_CLI = "vllm_omni/entrypoints/cli/serve.py"
_SERVE_TIMEOUT_FLAGS = ("--init-timeout", "--stage-init-timeout")


def serve_timeout_args(tree, seconds: float) -> list[str]:
    """The ``vllm-omni serve`` arguments that let the tree's server take ``seconds`` to start: each start-up timeout
    flag the tree's CLI declares (read from its source), [] where it declares none."""
    from pathlib import Path

    source = Path(tree, SERVE_CLI)
    text = source.read_text(encoding="utf-8") if source.is_file() else ""
    return [arg for flag in _SERVE_TIMEOUT_FLAGS if f'"{flag}"' in text for arg in (flag, str(int(seconds)))]


# The offline ``Omni(...)``'s same bounds, keyword arguments popped by the tree's ``entrypoints/omni_base.py``
# (0.18.0-0.30.0: ``init_timeout``, default 600 s; ``stage_init_timeout``, default 300 s).
OMNI_BASE = "vllm_omni/entrypoints/omni_base.py"
_OMNI_TIMEOUT_KEYS = ("init_timeout", "stage_init_timeout")


def omni_timeout_kwargs(tree, seconds: float) -> dict[str, int]:
    """The ``Omni(...)`` keyword arguments that let the tree's offline engine take ``seconds`` to start: each start-up
    timeout the tree's ``Omni`` reads (from its source), {} where it reads none."""
    from pathlib import Path

    source = Path(tree, OMNI_BASE)
    text = source.read_text(encoding="utf-8") if source.is_file() else ""
    return {key: int(seconds) for key in _OMNI_TIMEOUT_KEYS if f'kwargs.pop("{key}"' in text}
