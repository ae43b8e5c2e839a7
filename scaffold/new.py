"""`omnitts-scaffold new`: compute the plan of a complete TTS model integration (nothing is written here)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, StrictUndefined

from omnitts.scaffold import hub_readme, profiles
from omnitts.scaffold.codemods.base import run_codemod
from omnitts.scaffold.codemods.hf_config import RegisterHfConfig
from omnitts.scaffold.codemods.registry import AddDictTupleEntry
from omnitts.scaffold.codemods.serving_five_point import FivePointServing
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.formatting import format_python
from omnitts.scaffold.naming import ModelNames, template_context
from omnitts.scaffold.plan import FileOp, Plan, read_for_patch
from omnitts.scaffold.profiles import LayoutProfile
from omnitts.scaffold.render import render_pattern, render_shared, templates_root

PATTERN_STAGES = {"two-stage": "2 (talker + code2wav)", "single-stage": "single (AR + codec)", "native-ar": "single (native AR)"}
PATTERN_WORDS = {
    "two-stage": "two-stage (AR talker → codec decoder)",
    "single-stage": "single-stage generator",
    "native-ar": "single-stage vLLM-native AR (base LM + side computation)",
}


@dataclass(frozen=True)
class Patch:
    """One codemod on one shared file; picklable so patches can run in parallel processes."""

    rel: str
    command: type
    kwargs: tuple

    def run(self, source: str) -> str:
        return run_codemod(self.command, source, self.rel, **dict(self.kwargs))


def _run_file_patches(args: tuple[list[Patch], str]) -> str:
    patches, source = args
    for patch in patches:
        source = patch.run(source)
    return source


def shared_file_patches(profile: LayoutProfile, names: ModelNames) -> list[Patch]:
    patches = [
        Patch(
            profiles.REGISTRY,
            AddDictTupleEntry,
            (("dict_name", "_OMNI_MODELS"), ("key", arch), ("values", (folder, module, cls)), ("what", "architecture")),
        )
        for arch, folder, module, cls in names.registry_entries()
    ]
    patches.append(
        Patch(
            profiles.PIPELINE_REGISTRY,
            AddDictTupleEntry,
            (
                ("dict_name", "_OMNI_PIPELINES"),
                ("key", names.model_type),
                ("values", (f"vllm_omni.model_executor.models.{names.name}.pipeline", names.pipeline_var)),
                ("what", "pipeline"),
            ),
        )
    )
    patches.append(
        Patch(
            profiles.HF_CONFIGS,
            RegisterHfConfig,
            (
                ("model_type", names.model_type),
                ("module", f"vllm_omni.model_executor.models.{names.name}.configuration_{names.name}"),
                ("class_name", names.config_class),
            ),
        )
    )
    patches.append(
        Patch(
            profiles.SERVING,
            FivePointServing,
            (
                ("name", names.name),
                ("camel", names.camel),
                ("upper", names.upper),
                ("model_type", names.model_type),
                ("stage_keys", (names.stage_key,)),
            ),
        )
    )
    return patches


def _snippet(template: str, **ctx) -> str:
    env = Environment(undefined=StrictUndefined, keep_trailing_newline=True)
    return env.from_string((templates_root() / "snippets" / template).read_text(encoding="utf-8")).render(**ctx)


def plan_new(profile: LayoutProfile, names: ModelNames, *, parallel: bool = True) -> Plan:
    root = profile.root
    plan = Plan(root)
    ctx = template_context(names, request_id_keys=profile.request_id_keys)
    _refuse_taken_names(profile, names)

    # Codemods (libcst parsing dominates, serving_speech.py alone is ~3k lines) start first in two
    # worker processes; rendering and formatting the templates overlaps with them in this process.
    by_file: dict[str, list[Patch]] = {}
    for patch in shared_file_patches(profile, names):
        by_file.setdefault(patch.rel, []).append(patch)
    jobs = sorted(((patches, read_for_patch(root, rel)) for rel, patches in by_file.items()), key=lambda j: -len(j[1]))
    pool = ProcessPoolExecutor(max_workers=2) if parallel else None
    try:
        pending = [pool.submit(_run_file_patches, job) for job in jobs] if pool else None
        files = {f"vllm_omni/model_executor/{rel}": text for rel, text in render_pattern(names.pattern, ctx).items()}
        files.update(render_shared(ctx))
        files = format_python(files, root)
        for rel, text in sorted(files.items()):
            path = root / rel
            if path.exists():
                current = path.read_text(encoding="utf-8")
                if current != text:
                    raise ScaffoldError(f"{rel} already exists and differs from what would be generated; the name is taken")
                plan.add(FileOp(rel, text, old=current, reason="generated (unchanged)"))
            else:
                plan.add(FileOp(rel, text, reason="generated"))
        results = [f.result() for f in pending] if pending else [_run_file_patches(job) for job in jobs]
    finally:
        if pool:
            pool.shutdown(cancel_futures=True)
    for (patches, old), new in zip(jobs, results, strict=True):
        plan.add(FileOp(patches[0].rel, new, old=old, reason="patched"))

    for rel, row, section in _hub_edits(names, ctx):
        path = root / rel
        if not path.is_file():
            plan.notices.append(f"{rel} is not in this tree (a wheel holds the package only): hub row and section not added")
            continue
        old = read_for_patch(root, rel)
        new = hub_readme.add_section(hub_readme.add_table_row(old, row, rel), names.camel, section, rel)
        plan.add(FileOp(rel, new, old=old, reason="hub README"))
    return plan


def _hub_edits(names: ModelNames, ctx: dict[str, str]):
    common = dict(
        camel=names.camel,
        name=names.name,
        model_type=names.model_type,
        hf_repo=ctx["hf_repo"],
        stages=PATTERN_STAGES[names.pattern],
        pattern_description=PATTERN_WORDS[names.pattern],
        sample_rate_khz=f"{int(ctx['sample_rate']) / 1000:g}",
    )
    yield (
        profiles.OFFLINE_HUB,
        _snippet("offline_row.md.j2", **common),
        _snippet("offline_section.md.j2", **common),
    )
    yield (
        profiles.ONLINE_HUB,
        _snippet("online_row.md.j2", **common),
        _snippet("online_section.md.j2", **common),
    )


def _refuse_taken_names(profile: LayoutProfile, names: ModelNames) -> None:
    """Refuse names another model owns; our own earlier run of the same `new` is not a conflict."""
    pkg = profile.root / "vllm_omni/model_executor/models" / names.name
    marker = pkg / "pipeline.py"
    if pkg.exists() and not marker.exists():
        raise ScaffoldError(f"vllm_omni/model_executor/models/{names.name}/ already exists; the model name is taken")
    deploy = profile.root / profiles.DEPLOY / f"{names.model_type}.yaml"
    if deploy.exists() and not marker.exists():
        raise ScaffoldError(f"{profiles.DEPLOY}/{names.model_type}.yaml already exists; the model type is taken")
