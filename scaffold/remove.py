"""`omnitts-scaffold remove NAME`: the exact inverse of `new` (and of `new --like`).

The model's integration is read back from the tree (its folder, the registry / pipeline-registry /
HF-config entries that point into it, its serving constant or adapter), the files that belong to
it are deleted and every shared-file patch is reversed by the inverse codemods (`inverse_patches`),
so that `new` then `remove` leaves the tree byte-identical. A model wired by hand (an upstream
model) is refused when anything outside what `remove` deletes still refers to it.
"""

from __future__ import annotations

import re
from pathlib import Path

from omnitts.knowledge import layout
from omnitts.knowledge.eras import LayoutProfile
from omnitts.scaffold.codemods.serving import stage_constant_name
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.index import TreeIndex
from omnitts.scaffold.integration import Integration, inverse_patches, run_patches
from omnitts.scaffold.naming import camel_case, check_identifier
from omnitts.scaffold.plan import FileOp, Plan, read_for_patch

CONFIGS = "vllm_omni/transformers_utils/configs"


def _files_under(root: Path, rel_dir: str) -> list[str]:
    base = root / rel_dir
    if not base.is_dir():
        return []
    return sorted(
        p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )


def owned_files(index: TreeIndex, name: str, deploy_files: list[str], aliases: tuple[str, ...] = ()) -> list[str]:
    """The files of the model's own, by the tree's naming conventions (what `new` / `--like` create).

    `name` is the model folder; `aliases` are other names its examples / tests use (its served type,
    its pipeline keys: Ming-flash-omni-TTS keeps its examples under ming_flash_omni_tts/).
    """
    root = index.root
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
    return integ, owned_files(index, name, deploy_files, aliases)


def _identifiers(integ: Integration, deleted: set[str]) -> list[tuple[str, re.Pattern]]:
    pats = [
        (f"models.{integ.name}", re.compile(rf"models[./]{re.escape(integ.name)}\b")),
        (f"tts_adapters.{integ.name}", re.compile(rf"tts_adapters[./]{re.escape(integ.name)}\b")),
        (stage_constant_name(integ.upper), re.compile(rf"\b{re.escape(stage_constant_name(integ.upper))}\b")),
        (f'"{integ.model_type}"', re.compile(rf"""["']{re.escape(integ.model_type)}["']""")),
    ]
    pats += [(arch, re.compile(rf"\b{re.escape(arch)}\b")) for arch, *_ in integ.registry]
    return pats


SHARED = (layout.REGISTRY, layout.PIPELINE_REGISTRY, layout.HF_CONFIGS, layout.SERVING, layout.ADAPTERS_INIT)


def _refuse_leftovers(
    profile: LayoutProfile, integ: Integration, new_shared: dict[str, str], deleted: set[str]
) -> None:
    """Anything still naming the model after removal means it was wired by hand: refuse, change nothing."""
    patterns = _identifiers(integ, deleted)
    for rel in SHARED:
        text = new_shared.get(rel)
        if text is None:
            path = profile.root / rel
            text = path.read_text(encoding="utf-8") if path.is_file() else ""
        for what, pattern in patterns:
            match = pattern.search(text)
            if match:
                line = text.count("\n", 0, match.start()) + 1
                raise ScaffoldError(
                    f"{rel}:{line} still refers to {integ.name} ({what}) after every omnitts patch is reversed:"
                    " it was wired"
                    " by hand; remove only reverses what omnitts-scaffold new writes, nothing changed"
                )


def plan_remove(profile: LayoutProfile, name: str, *, parallel: bool = True) -> Plan:
    check_identifier(name, "model name")
    index = TreeIndex(profile)
    integ, files = integration_from_tree(index, name)
    plan = Plan(profile.root)
    for rel in files:
        plan.add(
            FileOp(
                rel,
                None,
                old=read_for_patch(profile.root, rel)
                if rel.endswith(".py")
                else (profile.root / rel).read_text(encoding="utf-8"),
                reason="deleted",
            )
        )
    results = run_patches(profile, inverse_patches(profile, integ), parallel=parallel)
    new_shared = {rel: new for rel, _, new in results}
    _refuse_leftovers(profile, integ, new_shared, set(files))
    for rel, old, new in results:
        plan.add(FileOp(rel, new, old=old, reason="patch reversed"))
    _remove_hub_edits(plan, profile, integ)
    return plan


def _remove_hub_edits(plan: Plan, profile: LayoutProfile, integ: Integration) -> None:
    from omnitts.scaffold import hub_readme

    for rel in (layout.OFFLINE_HUB, layout.ONLINE_HUB):
        path = profile.root / rel
        if not path.is_file():
            continue
        old = read_for_patch(profile.root, rel)
        title = hub_readme.section_title_of(old, integ.name)
        new = hub_readme.remove_section(hub_readme.remove_table_row(old, title, rel), title, rel)
        plan.add(FileOp(rel, new, old=old, reason="hub README"))
