"""What one model's integration consists of, and the shared-file patches (and inverses) that make it.

`new` builds an `Integration` from the model's names, `new --like` from a renamed in-tree model,
`remove` from what the tree holds; all three then go through `shared_file_patches()` (or its inverse
`inverse_patches()`), which reads the era's points from the profile. That is what makes `remove` the
exact inverse of `new` on every era.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from omnitts.knowledge import layout
from omnitts.knowledge.eras import Integration, LayoutProfile, PatchSpec
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
from omnitts.scaffold.plan import keeping_line_endings, read_for_patch

__all__ = ["Integration", "Patch", "from_names", "inverse_patches", "shared_file_patches"]

# The codemods that carry out the patches an era names (knowledge/eras/ says which apply, and in which order).
CODEMODS = {
    cls.__name__: cls
    for cls in (
        AddDictTupleEntry,
        AddDictNameEntry,
        RemoveDictEntry,
        AddModuleImport,
        RemoveModuleImport,
        AddImportAlias,
        RemoveImportAlias,
        RegisterHfConfig,
        UnregisterHfConfig,
        FivePointServing,
        RemoveFivePointServing,
        HybridServing,
        RemoveHybridServing,
    )
}


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
        adapter_module=profile.era.adapter_module(names.name),
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


def _forward(spec: PatchSpec) -> Patch:
    return Patch(spec.rel, CODEMODS[spec.codemod], spec.kwargs)


def _inverse(spec: PatchSpec) -> Patch:
    return Patch(spec.rel, CODEMODS[spec.inverse], spec.inverse_kwargs)


def shared_file_patches(profile: LayoutProfile, integ: Integration) -> list[Patch]:
    """The era's patches of shared files, in the order they are applied."""
    return [_forward(spec) for spec in profile.era.patches(integ)]


def inverse_patches(profile: LayoutProfile, integ: Integration) -> list[Patch]:
    """The exact inverses of `shared_file_patches`, in reverse order."""
    return [_inverse(spec) for spec in reversed(profile.era.patches(integ))]


def _run_file_patches(args: tuple[list[Patch], str]) -> str:
    patches, source = args

    def run_all(text: str) -> str:
        for patch in patches:
            text = patch.run(text)
        return text

    return keeping_line_endings(source, patches[0].rel, run_all)


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
        slow = any(patches[0].rel == layout.SERVING for patches, _ in self.jobs)
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
