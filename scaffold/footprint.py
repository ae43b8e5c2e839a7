"""A model's footprint: the identifiers by which a tree names one model, and the search for them.

`remove` deletes a model only when nothing it leaves behind still names the model (anything that does
was wired by hand, and would break). `new` refuses a name whose footprint the tree already holds,
since `remove` could never tell the new model's references from that other code: `new json` (the
tree says `"json"` everywhere), `new qwen3_t_t_s` (its config class `Qwen3TTSConfig` is upstream
qwen3_tts's). One footprint, one search, used by both: that is what keeps them exact inverses.

The footprint: the model's module paths (`models.<name>`, `tts_adapters.<name>`), its model type as a
string literal, its serving stage constant, its registry architectures and classes, its pipeline
variables, its config classes, and the classes its own files define whose names start with the
model's name (the generated `<Camel>Config`, `<Camel>TalkerForConditionalGeneration`, ...).
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

from omnitts.knowledge import layout
from omnitts.knowledge.eras import Integration
from omnitts.scaffold.codemods.serving import stage_constant_name

# Every text file of the tree is searched (imports, tests, docs, configs), minus what no tree owns.
TEXT_SUFFIXES = {".py", ".pyi", ".yaml", ".yml", ".md", ".sh", ".json", ".toml", ".cfg", ".ini", ".txt", ".rst"}
SKIP_DIRS = {".git", "__pycache__", ".omnitts-journal", "node_modules", ".venv"}

_WHAT = {
    "module": "its module path",
    "adapter": "its adapter module",
    "type": "its model type",
    "constant": "its stage constant",
    "name": "a class or variable name",
    "sibling": "its module (a relative import)",
}


def _squash(text: str) -> str:
    return text.replace("_", "").lower()


def own_classes(name: str, files: dict[str, str]) -> tuple[str, ...]:
    """Top-level classes of the model's own Python files whose name starts with the model's name
    (spelt any case, underscores aside: `qwen3_t_t_s` owns `Qwen3TTSConfig`)."""
    prefix, out = _squash(name), set()
    for rel, text in files.items():
        if not rel.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue  # not Python the scaffold wrote; the module paths still name it
        out.update(n.name for n in tree.body if isinstance(n, ast.ClassDef) and _squash(n.name).startswith(prefix))
    return tuple(sorted(out))


@dataclass(frozen=True)
class Footprint:
    name: str
    model_type: str
    constant: str
    names: tuple[str, ...]  # architectures, classes, pipeline variables (whole identifiers)

    @classmethod
    def of(cls, integ: Integration, classes: tuple[str, ...] = ()) -> Footprint:
        names = {arch for arch, *_ in integ.registry} | {entry[3] for entry in integ.registry}
        names |= {var for _, _, var in integ.pipelines} | {config for _, _, config in integ.hf_configs}
        names |= set(classes)
        return cls(integ.name, integ.model_type, stage_constant_name(integ.upper), tuple(sorted(n for n in names if n)))

    def pattern(self) -> re.Pattern:
        name = re.escape(self.name)
        alternatives = [
            rf"(?P<module>\bmodels[./]{name}\b)",
            rf"(?P<adapter>\btts_adapters[./]{name}\b)",
            rf"(?P<type>[\"']{re.escape(self.model_type)}[\"'])",
            rf"(?P<constant>\b{re.escape(self.constant)}\b)",
        ]
        if self.names:
            alternatives.append(rf"(?P<name>\b(?:{'|'.join(re.escape(n) for n in self.names)})\b)")
        return re.compile("|".join(alternatives))

    def sibling_import(self) -> re.Pattern:
        """A relative import of the model's package from another model's module (`from .<name> import`)."""
        name = re.escape(self.name)
        return re.compile(rf"^\s*from\s+\.+{name}\b|^\s*from\s+\.+\s+import\s+.*\b{name}\b", re.M)

    def needles(self) -> tuple[bytes, ...]:
        """Literals one of which every match contains: most files are skipped on a bytes search."""
        return tuple({w.encode() for w in (self.name, self.model_type, self.constant, *self.names)})


@dataclass(frozen=True)
class Reference:
    rel: str
    line: int
    text: str
    kind: str

    @property
    def what(self) -> str:
        return _WHAT[self.kind]


def first_reference(
    root: Path, footprint: Footprint, *, skip: set[str] = frozenset(), texts: dict[str, str] | None = None
) -> Reference | None:
    """Where the tree names the model, if anywhere: an import (or a path) first, else the first hit.

    `skip`: files not to search (those a removal deletes); `texts`: files' contents as a plan would
    leave them (shared files after the inverse patches), read from disk otherwise."""
    texts = texts or {}
    pattern, sibling, needles = footprint.pattern(), footprint.sibling_import(), footprint.needles()
    base = os.fspath(root)
    models = f"{layout.MODELS}/"
    first = None
    # Plain strings and os.walk, no Path per file: the walk is most of the cost (~1,500-1,800 files).
    for directory, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        prefix = os.path.relpath(directory, base).replace(os.sep, "/")
        prefix = "" if prefix == "." else f"{prefix}/"
        for filename in sorted(filenames):
            rel = prefix + filename
            if rel in skip or os.path.splitext(filename)[1] not in TEXT_SUFFIXES:
                continue
            text = texts.get(rel)
            if text is None:
                try:
                    with open(os.path.join(directory, filename), "rb") as f:
                        data = f.read()
                    if not any(n in data for n in needles):
                        continue
                    text = data.decode("utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
            match = pattern.search(text)
            kind = match.lastgroup if match else None
            if kind != "module" and rel.startswith(models):
                found = sibling.search(text)
                if found:
                    match, kind = found, "sibling"
            if match is None:
                continue
            ref = Reference(rel, text.count("\n", 0, match.start()) + 1, match.group(0).strip(), kind)
            if kind in ("module", "sibling"):  # an import (or a path) says the most: report it
                return ref
            first = first or ref
    return first
