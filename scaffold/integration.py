"""What one model's integration consists of, and the shared-file patches (and inverses) that make it.

`new` builds an `Integration` from the model's names, `new --like` from a renamed in-tree model,
`remove` from what the tree holds; all three then go through `shared_file_patches()` (or its inverse
`inverse_patches()`), which reads the era's points from the profile. That is what makes `remove` the
exact inverse of `new` on every era.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from omnitts.scaffold import profiles
from omnitts.scaffold.codemods.base import run_codemod
from omnitts.scaffold.codemods.hf_config import RegisterHfConfig, UnregisterHfConfig
from omnitts.scaffold.codemods.imports import AddImportAlias, AddModuleImport, RemoveImportAlias, RemoveModuleImport
from omnitts.scaffold.codemods.registry import AddDictNameEntry, AddDictTupleEntry, RemoveDictEntry
from omnitts.scaffold.codemods.serving import (
    FivePointServing,
    HybridServing,
    RemoveFivePointServing,
    RemoveHybridServing,
)
from omnitts.scaffold.naming import ModelNames
from omnitts.scaffold.plan import read_for_patch
from omnitts.scaffold.profiles import LayoutProfile


@dataclass(frozen=True)
class Integration:
    """Every shared-file entry of one model (all tuples, so that it pickles into worker processes)."""

    name: str  # package folder, module stem of the adapter / stage processor, method names
    camel: str
    upper: str
    model_type: str  # serving type = adapter name (the detected string)
    stage_keys: tuple[str, ...]  # entry stage key(s) serving detects
    registry: tuple[tuple[str, str, str, str], ...] = ()  # (arch, folder, module, class)
    pipelines: tuple[tuple[str, str, str], ...] = ()  # (pipeline key, module, VAR)
    hf_configs: tuple[tuple[str, str, str], ...] = ()  # (model_type, module, Config class)
    adapter_module: str | None = None  # tts_adapters/<module>.py, listed in the import tuple
    voice_cloning: bool = False


def from_names(names: ModelNames, profile: LayoutProfile, *, voice_cloning: bool = False) -> Integration:
    return Integration(
        name=names.name,
        camel=names.camel,
        upper=names.upper,
        model_type=names.model_type,
        stage_keys=(names.stage_key,),
        registry=tuple(names.registry_entries()),
        pipelines=((names.model_type, f"vllm_omni.model_executor.models.{names.name}.pipeline", names.pipeline_var),),
        hf_configs=(
            (
                names.model_type,
                f"vllm_omni.model_executor.models.{names.name}.configuration_{names.name}",
                names.config_class,
            ),
        ),
        adapter_module=names.name if profile.has_adapters else None,
        voice_cloning=voice_cloning,
    )


@dataclass(frozen=True)
class Patch:
    """One codemod on one shared file; picklable so patches can run in parallel processes."""

    rel: str
    command: type
    kwargs: tuple

    def run(self, source: str) -> str:
        return run_codemod(self.command, source, self.rel, **dict(self.kwargs))


def _serving_kwargs(integ: Integration) -> tuple:
    return (
        ("name", integ.name),
        ("camel", integ.camel),
        ("upper", integ.upper),
        ("model_type", integ.model_type),
        ("stage_keys", integ.stage_keys),
        ("voice_cloning", integ.voice_cloning),
    )


def shared_file_patches(profile: LayoutProfile, integ: Integration) -> list[Patch]:
    """The era's patches of shared files, in the order they are applied."""
    patches = [
        Patch(
            profiles.REGISTRY,
            AddDictTupleEntry,
            (("dict_name", "_OMNI_MODELS"), ("key", arch), ("values", (folder, module, cls)), ("what", "architecture")),
        )
        for arch, folder, module, cls in integ.registry
    ]
    for key, module, var in integ.pipelines:
        if profile.pipeline_registry == "_OMNI_PIPELINES":
            patches.append(
                Patch(
                    profiles.PIPELINE_REGISTRY,
                    AddDictTupleEntry,
                    (("dict_name", "_OMNI_PIPELINES"), ("key", key), ("values", (module, var)), ("what", "pipeline")),
                )
            )
        else:
            patches.append(Patch(profiles.PIPELINE_REGISTRY, AddModuleImport, (("module", module), ("name", var))))
            patches.append(
                Patch(
                    profiles.PIPELINE_REGISTRY,
                    AddDictNameEntry,
                    (("dict_name", "OMNI_PIPELINES"), ("key", key), ("value", var), ("what", "pipeline")),
                )
            )
    for model_type, module, cls in integ.hf_configs:
        patches.append(
            Patch(
                profiles.HF_CONFIGS,
                RegisterHfConfig,
                (("model_type", model_type), ("module", module), ("class_name", cls)),
            )
        )
    if profile.era == profiles.FIVE_POINT:
        patches.append(Patch(profiles.SERVING, FivePointServing, _serving_kwargs(integ)))
    elif profile.era == profiles.HYBRID:
        patches.append(Patch(profiles.SERVING, HybridServing, _serving_kwargs(integ)))
    if profile.has_adapters and integ.adapter_module:
        patches.append(
            Patch(
                profiles.ADAPTERS_INIT,
                AddImportAlias,
                (("module", profiles.ADAPTERS_MODULE), ("name", integ.adapter_module)),
            )
        )
    return patches


def inverse_patches(profile: LayoutProfile, integ: Integration) -> list[Patch]:
    """The exact inverses of `shared_file_patches`, in reverse order."""
    patches = [
        Patch(
            profiles.REGISTRY,
            RemoveDictEntry,
            (("dict_name", "_OMNI_MODELS"), ("key", arch), ("value", (folder, module, cls))),
        )
        for arch, folder, module, cls in integ.registry
    ]
    for key, module, var in integ.pipelines:
        if profile.pipeline_registry == "_OMNI_PIPELINES":
            patches.append(
                Patch(
                    profiles.PIPELINE_REGISTRY,
                    RemoveDictEntry,
                    (("dict_name", "_OMNI_PIPELINES"), ("key", key), ("value", (module, var))),
                )
            )
        else:
            patches.append(
                Patch(
                    profiles.PIPELINE_REGISTRY,
                    RemoveDictEntry,
                    (("dict_name", "OMNI_PIPELINES"), ("key", key), ("value", var)),
                )
            )
            patches.append(Patch(profiles.PIPELINE_REGISTRY, RemoveModuleImport, (("module", module), ("name", var))))
    for model_type, module, cls in integ.hf_configs:
        patches.append(
            Patch(
                profiles.HF_CONFIGS,
                UnregisterHfConfig,
                (("model_type", model_type), ("module", module), ("class_name", cls)),
            )
        )
    if profile.era == profiles.FIVE_POINT:
        patches.append(Patch(profiles.SERVING, RemoveFivePointServing, _serving_kwargs(integ)))
    elif profile.era == profiles.HYBRID:
        patches.append(Patch(profiles.SERVING, RemoveHybridServing, _serving_kwargs(integ)))
    if profile.has_adapters and integ.adapter_module:
        patches.append(
            Patch(
                profiles.ADAPTERS_INIT,
                RemoveImportAlias,
                (("module", profiles.ADAPTERS_MODULE), ("name", integ.adapter_module)),
            )
        )
    return list(reversed(patches))


def _run_file_patches(args: tuple[list[Patch], str]) -> str:
    patches, source = args
    for patch in patches:
        source = patch.run(source)
    return source


def patch_jobs(
    profile: LayoutProfile, patches: list[Patch], sources: dict[str, str] | None = None
) -> list[tuple[list[Patch], str]]:
    """Patches grouped by file with the file's text (read now: refusals such as a read-only file come first)."""
    by_file: dict[str, list[Patch]] = {}
    for patch in patches:
        by_file.setdefault(patch.rel, []).append(patch)
    jobs = []
    for rel, file_patches in by_file.items():
        old = sources[rel] if sources and rel in sources else read_for_patch(profile.root, rel)
        jobs.append((file_patches, old))
    return jobs


class PatchRun:
    """Patches running while the caller does other work (rendering templates, formatting).

    With `parallel`, the files go to two worker processes, largest first (serving_speech.py alone is
    2.5k-4k lines), and `results()` collects them; without, they run when `results()` is called.
    """

    def __init__(self, jobs: list[tuple[list[Patch], str]], *, parallel: bool = True):
        self.jobs = sorted(jobs, key=lambda j: -len(j[1]))
        # Only serving_speech.py (five-point / hybrid eras) is worth a worker process; the other files
        # take tens of milliseconds, less than starting one.
        slow = any(patches[0].rel == profiles.SERVING for patches, _ in self.jobs)
        self.pool = ProcessPoolExecutor(max_workers=2) if parallel and slow and len(self.jobs) > 1 else None
        self.pending = [self.pool.submit(_run_file_patches, job) for job in self.jobs] if self.pool else None

    def results(self) -> list[tuple[str, str, str]]:
        try:
            news = [f.result() for f in self.pending] if self.pending else [_run_file_patches(job) for job in self.jobs]
        finally:
            self.close()
        return [(patches[0].rel, old, new) for (patches, old), new in zip(self.jobs, news, strict=True)]

    def close(self) -> None:
        if self.pool:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None


def run_patches(
    profile: LayoutProfile, patches: list[Patch], *, parallel: bool = True, sources: dict[str, str] | None = None
):
    """Run patches grouped by file; returns [(rel, old, new)]. `sources` overrides what is read from disk."""
    return PatchRun(patch_jobs(profile, patches, sources), parallel=parallel).results()
