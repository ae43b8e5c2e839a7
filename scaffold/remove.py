"""`omnitts-scaffold remove NAME`: the exact inverse of `new` (and of `new --like`).

The model's integration is read back from the tree (its folder, the registry / pipeline-registry /
HF-config entries that point into it, its serving constant or adapter), the files that belong to
it are deleted and every shared-file patch is reversed by the inverse codemods (`inverse_patches`),
so that `new` then `remove` leaves the tree byte-identical. A model wired by hand (an upstream
model) is refused when anything outside what `remove` deletes still refers to it.
"""

from __future__ import annotations

from pathlib import Path

from omnitts.knowledge import layout
from omnitts.knowledge.eras import LayoutProfile
from omnitts.scaffold.codemods.serving import stage_constant_name
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.footprint import Footprint, first_reference, own_classes
from omnitts.scaffold.index import TreeIndex
from omnitts.scaffold.integration import Integration, inverse_patches, run_patches
from omnitts.scaffold.naming import camel_case, check_identifier
from omnitts.scaffold.plan import FileOp, Plan, keeping_line_endings, read_for_patch, read_text

CONFIGS = "vllm_omni/transformers_utils/configs"


def _files_under(root: Path, rel_dir: str) -> list[str]:
    base = root / rel_dir
    if not base.is_dir():
        return []
    return sorted(
        p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )


def owned_files(root: Path, name: str, deploy_files: list[str], aliases: tuple[str, ...] = ()) -> list[str]:
    """The files of the model's own, by the tree's naming conventions (what `new` / `--like` create).

    `name` is the model folder; `aliases` are other names its examples / tests use (its served type,
    its pipeline keys: Ming-flash-omni-TTS keeps its examples under ming_flash_omni_tts/). `new` refuses
    a name for which this finds files already (`remove` would delete them as the model's own).
    """
    files = _files_under(root, f"{layout.MODELS}/{name}")
    for rel in (f"{layout.PROCESSORS}/{name}.py", f"{layout.ADAPTERS}/{name}.py", f"{CONFIGS}/{name}.py"):
        if (root / rel).is_file():
            files.append(rel)
    files += [d for d in deploy_files if (root / d).is_file()]
    names = list(dict.fromkeys([name, *aliases]))
    for n in names:
        for kind in ("offline_inference", "online_serving"):
            files += _files_under(root, f"examples/{kind}/text_to_speech/{n}")
    tests = root / "tests"
    if tests.is_dir():
        models = root / layout.MODELS
        others = {p.name for p in models.iterdir() if p.is_dir() and p.name not in names}
        for n in names:
            for d in sorted(tests.rglob(n)):
                if d.is_dir() and "__pycache__" not in d.parts:
                    files += _files_under(root, d.relative_to(root).as_posix())
            for path in sorted(tests.rglob(f"test_{n}*.py")):
                stem = path.stem.removeprefix("test_")
                claimed = any(o.startswith(f"{n}_") and (stem == o or stem.startswith(f"{o}_")) for o in others)
                if (stem == n or stem.startswith(f"{n}_")) and not claimed:
                    files.append(path.relative_to(root).as_posix())
    return sorted(dict.fromkeys(files))


def integration_from_tree(index: TreeIndex, name: str) -> tuple[Integration, list[str]]:
    """What `new` (or `--like`) added for model `name`, read back from the tree; and its files."""
    profile = index.profile
    if not (index.root / layout.MODELS / name).is_dir():
        raise ScaffoldError(f"no model folder {layout.MODELS}/{name}/ in {index.root}; nothing to remove")
    registry = tuple((arch, *entry) for arch, entry in index.registry.items() if entry and entry[0] == name)
    pipeline_module = f"vllm_omni.model_executor.models.{name}.pipeline"
    pipelines = tuple(
        (key, entry[0], entry[1])
        for key, entry in index.pipeline_registry.items()
        if entry and entry[0] == pipeline_module
    )
    config_prefixes = (f"vllm_omni.model_executor.models.{name}.", f"{CONFIGS.replace('/', '.')}.{name}")
    hf_configs = tuple(
        (model_type, module, cls)
        for model_type, (cls, module) in index.hf_configs.items()
        if cls and module and (module.startswith(config_prefixes[0]) or module == config_prefixes[1])
    )
    upper = name.upper()
    model_type, stage_keys = None, ()
    adapter_module = None
    if profile.point("adapter"):
        in_tuple = name in index.adapter_import_tuple
        if in_tuple or (index.root / layout.ADAPTERS / f"{name}.py").is_file():
            adapter_module = name
        owned = [a for a in index.adapters.adapters.values() if a.module == name]
        if owned:
            model_type, stage_keys = owned[0].name, tuple(sorted(owned[0].stage_keys))
    if profile.serving_points:
        constant = stage_constant_name(upper)
        keys = sorted(k for k, c in index.stage_constants.items() if c == constant)
        if keys:
            stage_keys = tuple(keys)
            model_type = index.detect(keys[0], None) or model_type
    deploy_files = []
    for p in index.pipelines:
        if p.folder == name:
            from omnitts.scaffold.check import deploy_candidates

            deploy_files += deploy_candidates(index, p)
    if profile.era.stage_args_topology:  # 0.18: the stage_args yaml `new` writes, named after the model type
        mine = f"{layout.STAGE_CONFIGS}/{model_type or name}.yaml"
        deploy_files += [p.legacy for p in index.legacy_pipelines if p.folder == name and p.legacy == mine]
    integ = Integration(
        name=name,
        camel=camel_case(name),
        upper=upper,
        model_type=model_type or name,
        stage_keys=stage_keys,
        registry=registry,
        pipelines=pipelines,
        hf_configs=hf_configs,
        adapter_module=adapter_module,
    )
    aliases = (integ.model_type, *(key for key, _, _ in pipelines))
    return integ, owned_files(index.root, name, deploy_files, aliases)


SHARED = (layout.REGISTRY, layout.PIPELINE_REGISTRY, layout.HF_CONFIGS, layout.SERVING, layout.ADAPTERS_INIT)


def _refuse_references(profile: LayoutProfile, footprint: Footprint, after: dict[str, str], deleted: set[str]) -> None:
    """Anything in the tree (imports, tests, docs, configs) that still names the model after removal: it
    was wired by hand, or the folder is shared, and removing it would break what names it. Refuse,
    change nothing. `after`: the files the removal edits, as it would leave them."""
    ref = first_reference(profile.root, footprint, skip=deleted, texts=after)
    if ref is None:
        return
    if ref.rel in SHARED:
        raise ScaffoldError(
            f"{ref.rel}:{ref.line} still refers to {footprint.name} ({ref.text}) after every omnitts patch is"
            " reversed: it was wired by hand; remove only reverses what omnitts-scaffold new writes, nothing changed"
        )
    raise ScaffoldError(
        f"{ref.rel}:{ref.line} still refers to {footprint.name} ({ref.text}) after removal: the tree uses it (a"
        " shared package or a model wired by hand); remove only deletes what nothing else names, nothing changed"
    )


def plan_remove(profile: LayoutProfile, name: str, *, parallel: bool = True, force: bool = False) -> Plan:
    """Remove what `new` created for `name`. `force` skips the shape checks (`_refuse_unscaffolded`); the
    leftovers check always runs, so a package the tree still uses is never removed."""
    check_identifier(name, "model name")
    index = TreeIndex(profile)
    integ, files = integration_from_tree(index, name)
    if not force:
        _refuse_unscaffolded(index, integ)
    plan = Plan(profile.root)
    for rel in files:
        try:
            old = read_for_patch(profile.root, rel) if rel.endswith(".py") else read_text(profile.root / rel)
        except UnicodeDecodeError:
            raise ScaffoldError(f"{rel} is not UTF-8 text, which new never writes; remove refuses it") from None
        plan.add(FileOp(rel, None, old=old, reason="deleted"))
    results = run_patches(profile, inverse_patches(profile, integ), parallel=parallel)
    for rel, old, new in results:
        plan.add(FileOp(rel, new, old=old, reason="patch reversed"))
    _remove_hub_edits(plan, profile, integ)
    deleted = {op.rel: op.old for op in plan.ops if op.new is None}
    footprint = Footprint.of(integ, own_classes(name, deleted))
    _refuse_references(profile, footprint, {op.rel: op.new for op in plan.ops if op.new is not None}, set(deleted))
    return plan


def _remove_hub_edits(plan: Plan, profile: LayoutProfile, integ: Integration) -> None:
    from omnitts.scaffold import hub_readme

    for rel in (layout.OFFLINE_HUB, layout.ONLINE_HUB):
        path = profile.root / rel
        if not path.is_file():
            continue
        old = read_for_patch(profile.root, rel)

        def edit(text: str, rel: str = rel) -> str:
            title = hub_readme.section_title_of(text, integ.name)
            return hub_readme.remove_section(hub_readme.remove_table_row(text, title, rel), title, rel)

        new = keeping_line_endings(old, rel, edit)
        plan.add(FileOp(rel, new, old=old, reason="hub README"))


# -- what `new` can have created -------------------------------------------------------------------------

OVERRIDE = "--force removes it anyway when nothing else in the tree refers to it"


def _model_files(root: Path, name: str) -> set[str]:
    base = root / layout.MODELS / name
    return {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def scaffold_shapes(name: str) -> dict[str, set[str]]:
    """Pattern -> the files `new --pattern` writes into `models/<name>/` (read from the templates' paths)."""
    from omnitts.scaffold.naming import PATTERNS
    from omnitts.scaffold.render import templates_root

    placeholder = "{{cookiecutter.name}}"
    shared = templates_root() / "shared" / placeholder / layout.MODELS / placeholder
    shapes = {}
    for pattern in PATTERNS:
        folder = templates_root() / "patterns" / pattern / placeholder / "models" / placeholder
        files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
        files |= {p.relative_to(shared).as_posix() for p in shared.rglob("*") if p.is_file()}
        shapes[pattern] = {f.replace(placeholder, name) for f in files}
    return shapes


def _like_shaped(root: Path, name: str, files: set[str]) -> str | None:
    """The in-tree model whose folder, renamed, has exactly these files (what `new --like` copied), if any."""
    from omnitts.scaffold.like import Renamer

    for other in sorted(p.name for p in (root / layout.MODELS).iterdir() if p.is_dir()):
        if other == name or not (root / layout.MODELS / other / "pipeline.py").is_file():
            continue
        rename = Renamer(((other, name),))
        if {rename(f) for f in _model_files(root, other)} == files:
            return other
    return None


def _refuse_unscaffolded(index: TreeIndex, integ: Integration) -> None:
    """Refuse a folder `new` cannot have created: a shared package, an upstream model, a model grown by hand.

    `new` (and `--like`) always write `pipeline.py`, a registry entry and a pipeline-registry entry that
    point into the folder, and exactly the files of a pattern (or of the copied model); anything else
    was written by someone else, and deleting it would lose their work."""
    root, name, folder = index.root, integ.name, f"{layout.MODELS}/{integ.name}/"
    # 0.18 (stage_args topology): `new` writes stage_configs/<model_type>.yaml, no pipeline.py, no pipeline registry.
    legacy = index.profile.era.stage_args_topology
    marker = f"{layout.STAGE_CONFIGS}/{integ.model_type}.yaml" if legacy else f"{folder}pipeline.py"
    if not (root / marker).is_file():
        raise ScaffoldError(
            f"{folder} has no {'stage config ' + marker if legacy else 'pipeline.py'}: it is a shared package or a"
            f" model omnitts-scaffold new did not create; remove refuses it ({OVERRIDE})"
        )
    wired = (("registry", integ.registry),) + (() if legacy else (("pipeline registry", integ.pipelines),))
    missing = [what for what, points in wired if not points]
    if missing:
        raise ScaffoldError(
            f"{folder} has no {' or '.join(missing)} entry of its own, which new always writes: not a model"
            f" omnitts-scaffold new created; remove refuses it ({OVERRIDE})"
        )
    files = _model_files(root, name)
    shapes = {p: shape - ({"pipeline.py"} if legacy else set()) for p, shape in scaffold_shapes(name).items()}
    if any(files == shape for shape in shapes.values()) or _like_shaped(root, name, files):
        return
    closest = min(shapes.values(), key=lambda shape: len(shape ^ files))
    extra, missing_files = sorted(files - closest), sorted(closest - files)
    detail = f"files new does not write: {', '.join(extra[:3])}" if extra else ""
    detail += ("; " if extra and missing_files else "") + (
        f"missing: {', '.join(missing_files[:3])}" if missing_files else ""
    )
    raise ScaffoldError(
        f"{folder} does not have the files of a scaffolded model ({detail}): an upstream model or one grown by"
        f" hand; remove refuses it ({OVERRIDE})"
    )
