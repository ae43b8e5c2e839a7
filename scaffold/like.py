"""`omnitts-scaffold new NAME --like EXISTING`: an in-tree model's integration as the template.

As Hugging Face's `add-new-model-like` does for transformers, the source model's own files (its
package and pipeline, stage input processor, deploy yaml, adapter, HF config module, examples and
tests) are copied with every spelling of its names replaced, and every shared-file registration it
has is made again for the new names, by the same codemods `new` uses; all of it is one plan,
applied as one transaction. Unlike `add-new-model-like`, nothing is inserted at marker strings, a
second identical run is a no-op, and `remove NAME` undoes it byte for byte.

Renaming is case- and separator-aware and touches whole identifiers only (or whole CamelCase / snake_case
components of one: `FishSpeechConfig`, `fish_speech_talker`), never the inside of a word (`selfish speechless`,
`cosyvoice30` stay as they are): for `fish_speech` -> `my_tts`, `fish_speech`, `FishSpeech`,
`FISH_SPEECH`, `Fish Speech` and `fish-speech` become `my_tts`, `MyTts`, `MY_TTS`, `My Tts` and
`my-tts`. The source's served type and pipeline keys (`fish_tts`, `fish_qwen3_omni`) become the new
model type, and an entry stage key that does not contain the source's name (`latent_generator`)
becomes the new stage key, so the copy never shares detection with its source.

In the five-point era the source's request handling lives inline in serving_speech.py (it has no
module of its own to copy): the copy is wired through the generated five points, and a notice says
so. In the hybrid and adapter eras the source's adapter is the serving code, and it is copied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from omnitts.knowledge import layout
from omnitts.knowledge.eras import LayoutProfile
from omnitts.scaffold import hub_readme
from omnitts.scaffold.check import deploy_candidates, model_views
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.formatting import format_python
from omnitts.scaffold.index import TreeIndex
from omnitts.scaffold.integration import Integration, run_patches, shared_file_patches
from omnitts.scaffold.naming import camel_case, check_identifier, check_name_in_tree
from omnitts.scaffold.new import adapter_stage_key_owners, add_generated, refuse_claimed_files, refuse_taken_footprint
from omnitts.scaffold.plan import FileOp, Plan, keeping_line_endings, read_for_patch
from omnitts.scaffold.remove import CONFIGS, owned_files

TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".md", ".sh", ".json", ".txt", ".toml", ".cfg", ".jinja", ".j2"}


@dataclass(frozen=True)
class Renamer:
    """Replace every spelling of a set of source names, keeping each occurrence's case and separator."""

    pairs: tuple[tuple[str, str], ...]  # (old snake_case name, new snake_case name), longest first
    literals: tuple[tuple[str, str], ...] = ()  # exact quoted strings (stage keys without the name)

    def __call__(self, text: str) -> str:
        for old, new in self.literals:
            text = re.sub(rf"""(["']){re.escape(old)}\1""", lambda m, new=new: f"{m.group(1)}{new}{m.group(1)}", text)
        for old, new in self.pairs:
            single = "_" not in old.strip("_")
            text = _pattern(old).sub(
                lambda m, new=new, single=single: _respell(m.group(0), new, single) if _whole(m) else m.group(0), text
            )
        return text


def _whole(m: re.Match) -> bool:
    """The match is a whole identifier or a whole component of one (`fish_speech_talker`, `FishSpeechConfig`,
    `Qwen3TTSTalker`), not the inside of a longer word: `selfish speechless`, `cosyvoice30`."""
    text, start, end, word = m.string, m.start(), m.end(), m.group(0)
    if start > 0 and text[start - 1].isalnum():
        prev = text[start - 1]
        camel = word[0].isupper() and (prev.islower() or prev.isdigit() or (len(word) > 1 and word[1].islower()))
        if not camel:
            return False
    if end < len(text) and text[end].isalnum():
        nxt = text[end]
        after = text[end + 1] if end + 1 < len(text) else ""
        mixed = any(c.islower() for c in word)  # an all-caps word runs on in caps: `VOXCPM2X`
        camel = nxt.isupper() and ((mixed and (word[-1].islower() or word[-1].isdigit())) or after.islower())
        if not camel:
            return False
    return True


def _pattern(snake: str) -> re.Pattern:
    tokens = [re.escape(t) for t in snake.split("_") if t]
    return re.compile("(?i)" + r"[-_ ]?".join(tokens))


def _respell(match: str, new: str, single: bool = False) -> str:
    """`new` spelled the way `match` is: case style and separator (a one-word source has no separator to
    copy: snake and SCREAMING spellings keep the new name's underscores, CamelCase joins)."""
    tokens = [t for t in new.split("_") if t]
    sep = next((c for c in match if c in "-_ "), "")
    letters = [c for c in match if c.isalpha()]
    if letters and all(c.islower() for c in letters):
        return (sep or ("_" if single else "")).join(tokens)
    if letters and all(c.isupper() for c in letters):
        return (sep or ("_" if single else "")).join(t.upper() for t in tokens)
    return sep.join(t[:1].upper() + t[1:] for t in tokens)


@dataclass
class Source:
    """What the source model's integration is, read from the tree."""

    folder: str
    model_type: str  # served type
    entry_stage: str
    pipeline_keys: list[str]
    adapter_module: str | None
    files: list[str]
    integ: Integration


def _source(index: TreeIndex, like: str) -> Source:
    views = [v for v in model_views(index, like) if v.model_type and v.pipelines and not v.diffusion]
    if len(views) != 1:
        found = ", ".join(v.label for v in model_views(index, like))
        raise ScaffoldError(
            f"--like {like}: need exactly one served model with a pipeline.py, found: {found or 'none'}"
        )
    view = views[0]
    if any(p.legacy for p in view.pipelines):
        raise ScaffoldError(
            f"--like {like}: its topology is a legacy stage_configs yaml; pick a model with a pipeline.py"
        )
    folder = view.folder
    stage, _ = index.entry_stage(view.pipelines[0])
    from omnitts.scaffold.remove import integration_from_tree

    integ, _ = integration_from_tree(index, folder)
    keys = [k for k, _, _ in integ.pipelines]
    deploy = [d for p in index.pipelines if p.folder == folder for d in deploy_candidates(index, p)]
    adapter_module = None
    if index.adapters and view.model_type in index.adapters.adapters:
        adapter_module = index.adapters.adapters[view.model_type].module
    aliases = (view.model_type, *keys)
    files = owned_files(index.root, folder, deploy, aliases)
    if adapter_module and adapter_module != folder:
        files.append(f"{layout.ADAPTERS}/{adapter_module}.py")
    hf_configs = tuple(
        (mt, mod, cls)
        for mt, (cls, mod) in index.hf_configs.items()
        if cls
        and mod
        and (mt in (view.model_type, *keys) or mod.startswith(f"vllm_omni.model_executor.models.{folder}."))
    )
    for _, module, _ in hf_configs:
        rel = module.replace(".", "/") + ".py"
        if module.startswith(CONFIGS.replace("/", ".")) and (index.root / rel).is_file():
            files.append(rel)
    integ = Integration(
        name=folder,
        camel=camel_case(folder),
        upper=folder.upper(),
        model_type=view.model_type,
        stage_keys=(stage.model_stage,) if stage and stage.model_stage else (),
        registry=integ.registry,
        pipelines=integ.pipelines,
        hf_configs=hf_configs,
        adapter_module=adapter_module,
    )
    return Source(
        folder,
        view.model_type,
        stage.model_stage if stage else None,
        keys,
        adapter_module,
        sorted(dict.fromkeys(files)),
        integ,
    )


def renamer_for(src: Source, name: str, model_type: str, stage_key: str | None) -> Renamer:
    """Identifiers and paths follow the folder name; quoted model types / pipeline keys become the new
    model type (they differ when the source's folder and type are one string, e.g. voxcpm2)."""
    pairs = {src.folder: name}
    for old in (src.model_type, *src.pipeline_keys):
        pairs.setdefault(old, model_type)
    ordered = tuple(sorted(pairs.items(), key=lambda kv: -len(kv[0])))
    literals = []
    probe = Renamer(ordered)
    if src.entry_stage and probe(src.entry_stage) == src.entry_stage:
        literals.append((src.entry_stage, stage_key or name))  # a stage key without the source's name
    for old in dict.fromkeys((src.model_type, *src.pipeline_keys)):
        if old != src.entry_stage:
            literals.append((old, model_type))
    return Renamer(ordered, tuple(literals))


_STAGE_CONTEXTS = (
    (r"(model_stage\s*=\s*)([\"']){old}\2", r"\g<1>\g<2>{new}\g<2>"),  # StagePipelineConfig(model_stage="...")
    (r"(model_stage:\s*){old}\b", r"\g<1>{new}"),  # yaml
    (r"(stage_keys\s*=\s*frozenset\(\{{[^}}]*?)([\"']){old}\2", r"\g<1>\g<2>{new}\g<2>"),  # adapters
)


def set_stage_key(text: str, old: str, new: str) -> str:
    """Where the renamed entry stage key is declared, make it `new` (the key is also the type there)."""
    for pattern, repl in _STAGE_CONTEXTS:
        text = re.sub(pattern.format(old=re.escape(old)), repl.format(new=new), text)
    return text


def _prune_adapters(text: str, keep: str, rel: str) -> str:
    """In a copied adapter module, keep only the adapter registered as `keep` (a module may hold several)."""
    module = cst.parse_module(text)
    body = []
    for stmt in module.body:
        if isinstance(stmt, cst.ClassDef) and any(
            isinstance(d.decorator, cst.Name) and d.decorator.value == "register_tts_adapter" for d in stmt.decorators
        ):
            names = [
                s.body[0].value
                for s in stmt.body.body
                if isinstance(s, cst.SimpleStatementLine)
                and isinstance(s.body[0], cst.Assign)
                and any(isinstance(t.target, cst.Name) and t.target.value == "name" for t in s.body[0].targets)
            ]
            value = names[0].evaluated_value if names and isinstance(names[0], cst.SimpleString) else None
            if value != keep:
                continue
        body.append(stmt)
    return module.with_changes(body=body).code


def plan_like(
    profile: LayoutProfile,
    name: str,
    like: str,
    *,
    model_type: str | None = None,
    stage_key: str | None = None,
    parallel: bool = True,
) -> Plan:
    check_identifier(name, "model name")
    model_type = check_identifier(model_type or name, "model type")
    if stage_key is not None:
        check_identifier(stage_key, "stage key")
    check_name_in_tree(profile.root, name)
    index = TreeIndex(profile)
    src = _source(index, like)
    if src.folder == name:
        raise ScaffoldError(f"--like {like}: the new model needs a name other than its source's ({name})")
    rename = renamer_for(src, name, model_type, stage_key)
    renamed_stage = rename(f'"{src.entry_stage}"').strip('"')
    new_stage = stage_key or renamed_stage
    check_identifier(new_stage, "stage key")

    files: dict[str, str] = {}
    notices: list[str] = []
    for rel in src.files:
        path = profile.root / rel
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            notices.append(f"{rel} is not text; not copied")
            continue
        if path.suffix not in TEXT_SUFFIXES:
            notices.append(f"{rel} has no known text suffix; copied and renamed as text")
        adapter_rel = f"{layout.ADAPTERS}/{src.adapter_module}.py"
        new_rel = f"{layout.ADAPTERS}/{name}.py" if rel == adapter_rel else rename(rel)
        if new_rel == rel:
            raise ScaffoldError(f"--like {like}: {rel} keeps its path after renaming; cannot copy it")
        new_text = rename(text)
        if new_stage != renamed_stage:
            new_text = set_stage_key(new_text, renamed_stage, new_stage)
        if rel == adapter_rel:
            new_text = _prune_adapters(new_text, model_type, new_rel)
        files[new_rel] = new_text
    taken = [rel for rel in files if (profile.root / rel).exists()]
    pkg = f"{layout.MODELS}/{name}/pipeline.py"
    if taken and not (profile.root / pkg).is_file():
        raise ScaffoldError(f"{taken[0]} already exists; the model name is taken")

    # The new model's stage key must be its own (detection is first-match on stage keys).
    from omnitts.scaffold.naming import ModelNames

    arch = rename(src.integ.registry[0][0]) if src.integ.registry else f"{camel_case(name)}ForConditionalGeneration"
    names = ModelNames(name, "two-stage", model_type, new_stage, arch)
    if adapter_stage_key_owners(profile, names, None):
        raise ScaffoldError(f"stage key {new_stage!r} is already served; choose --stage-key")
    if profile.serving_points:
        from omnitts.scaffold.codemods.serving import existing_stage_keys, stage_constant_name

        owner = existing_stage_keys(index.serving).get(new_stage)
        if owner is not None and owner != stage_constant_name(name.upper()):
            raise ScaffoldError(
                f"stage key {new_stage!r} is already served by {owner} in serving_speech.py; choose --stage-key"
            )

    files = format_python(files, profile.root)
    plan = Plan(profile.root)
    plan.notices += notices
    add_generated(plan, profile.root, files)

    integ = Integration(
        name=name,
        camel=camel_case(name),
        upper=name.upper(),
        model_type=model_type,
        stage_keys=(new_stage,),
        registry=tuple((rename(a), name, rename(m), rename(c)) for a, _, m, c in src.integ.registry),
        pipelines=tuple((rename(k), rename(mod), rename(var)) for k, mod, var in src.integ.pipelines),
        hf_configs=tuple((rename(mt), rename(mod), rename(cls)) for mt, mod, cls in src.integ.hf_configs),
        adapter_module=name if src.adapter_module else None,
    )
    for what, old, new in (
        ("architecture", [r[0] for r in src.integ.registry], [r[0] for r in integ.registry]),
        ("pipeline key", [p[0] for p in src.integ.pipelines], [p[0] for p in integ.pipelines]),
        ("config class", [h[2] for h in src.integ.hf_configs], [h[2] for h in integ.hf_configs]),
    ):
        same = [o for o, n in zip(old, new, strict=True) if o == n]
        if same:
            raise ScaffoldError(
                f"--like {like}: the {what} {same[0]!r} does not contain the source's name; it cannot be renamed"
            )
    results = run_patches(profile, shared_file_patches(profile, integ), parallel=parallel)
    if not (profile.root / pkg).is_file():  # not our own earlier run
        refuse_claimed_files(profile.root, name, (model_type, *(key for key, _, _ in integ.pipelines)))
        refuse_taken_footprint(profile.root, name, integ, files)
    for rel, old, new in results:
        plan.add(FileOp(rel, new, old=old, reason="patched"))
    _copy_hub_sections(plan, profile, src, rename)
    if profile.point("serving.build"):  # request handling inline in serving_speech.py
        plan.notices.append(
            f"five-point era: {src.model_type}'s request handling is inline in serving_speech.py; {name} is wired"
            f" through the generated _validate_{name}_request / _build_{name}_params,"
            f" port {src.model_type}'s branches into them"
        )
    return plan


def _copy_hub_sections(plan: Plan, profile: LayoutProfile, src: Source, rename: Renamer) -> None:
    for rel in (layout.OFFLINE_HUB, layout.ONLINE_HUB):
        path = profile.root / rel
        if not path.is_file():
            continue
        old = read_for_patch(profile.root, rel)

        def copy_section(text: str, rel: str = rel) -> str:
            title = None
            for folder in (src.folder, src.model_type, *src.pipeline_keys):
                title = title or hub_readme.section_title_of(text, folder)
            if title is None:
                return text
            section, row = hub_readme.section_text(text, title), hub_readme.row_text(text, title)
            if row is not None:
                text = hub_readme.add_table_row(text, rename(row), rel)
            if section is not None:
                text = hub_readme.add_section(text, rename(title), rename(section), rel)
            return text

        new = keeping_line_endings(old, rel, copy_section)
        plan.add(FileOp(rel, new, old=old, reason="hub README"))
