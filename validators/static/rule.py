"""Rule classes: an id, the invariant served, a severity, a docstring and VALID/INVALID cases.

A rule's docstring has three parts that docs/rules.md and ``omnitts-lint --rule ID`` render:
the first paragraph says what is reported, a paragraph starting ``Why:`` says why it matters, and
one starting ``Fix:`` says how to fix it. VALID/INVALID cases sit beside the class and run as tests
(tests/static/test_rule_cases.py); a rule without both kinds of cases fails the registry check.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from omnitts.knowledge.treefacts import TreeContext
    from omnitts.validators.static.source import SourceFile

MODEL_PATH = "vllm_omni/model_executor/models/demo_tts/modeling_demo_tts.py"
CONSUMER_PATH = "examples/offline_inference/text_to_speech/demo_tts/end2end.py"

# File kinds a file-scope rule can ask for (source.SourceFile.kind).
MODEL, CONSUMER, CODE, CONFIG = "model", "consumer", "code", "config"


@dataclass(frozen=True)
class Valid:
    """Code the rule must accept. ``files`` adds more files of a small tree (integration rules)."""

    code: str = ""
    path: str = MODEL_PATH
    files: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def all_files(self) -> dict[str, str]:
        out = dict(self.files)
        if self.code or not out:
            out[self.path] = self.code
        return out


@dataclass(frozen=True)
class Invalid(Valid):
    """Code the rule must report: ``line`` (in ``path``) and a ``message`` substring; ``fixed`` is
    the file after the autofix, for rules that have one."""

    line: int | None = None
    message: str = ""
    count: int = 1
    fixed: str | None = None


@dataclass
class Report:
    """What a rule yields; the engine turns it into a Finding (symbol, statement hash, severity)."""

    line: int
    col: int
    message: str
    node: ast.AST | None = None
    fix: tuple[int, int, int, int, str] | None = None  # (line, col, end_line, end_col, replacement)
    path: str | None = None  # tree-scope rules name the file they report on
    symbol: str | None = None


class Rule:
    """Base class. File-scope rules implement ``check(src)``; tree-scope ones ``check_tree(ctx)``."""

    id: ClassVar[str] = ""
    name: ClassVar[str] = ""
    invariant: ClassVar[str] = ""
    severity: ClassVar[str] = "error"
    scope: ClassVar[str] = "file"  # "file" | "tree"
    kinds: ClassVar[frozenset[str]] = frozenset({MODEL})
    # Textual prefilter (TorchFix-style): the rule only runs on files containing one of these.
    needles: ClassVar[tuple[str, ...]] = ()
    fixable: ClassVar[bool] = False
    VALID: ClassVar[list[Valid]] = []
    INVALID: ClassVar[list[Invalid]] = []
    # The pull requests / issues that motivate the rule (rendered in docs/rules.md).
    motivation: ClassVar[str] = ""

    def check(self, src: SourceFile) -> Iterator[Report]:
        return iter(())

    def check_tree(self, ctx: TreeContext) -> Iterator[Report]:
        return iter(())

    # --- helpers for subclasses -------------------------------------------------------------
    @staticmethod
    def at(node: ast.AST, message: str, fix: tuple[int, int, int, int, str] | None = None) -> Report:
        return Report(getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1, message, node, fix)

    # --- documentation ----------------------------------------------------------------------
    @classmethod
    def doc_parts(cls) -> dict[str, str]:
        doc = inspect.cleandoc(cls.__doc__ or "")
        parts = {"what": "", "why": "", "fix": ""}
        key = "what"
        for para in re.split(r"\n\s*\n", doc):
            m = re.match(r"(Why|Fix):\s*", para)
            if m:
                key = m.group(1).lower()
                para = para[m.end() :]
            parts[key] = (parts[key] + "\n\n" + para).strip() if parts[key] else para.strip()
        return parts

    @classmethod
    def summary(cls) -> str:
        return " ".join(cls.doc_parts()["what"].split("\n\n")[0].split())


REGISTRY: dict[str, type[Rule]] = {}


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: validates the rule's metadata at import time (fail early, fail closed)."""
    if not re.fullmatch(r"OMNI-(I[1-5]|INT|REF|META)-\d{3}", cls.id):
        raise ValueError(f"{cls.__name__}: bad rule id {cls.id!r}")
    if cls.id in REGISTRY:
        raise ValueError(f"duplicate rule id {cls.id}")
    if cls.severity not in ("error", "warning"):
        raise ValueError(f"{cls.id}: bad severity {cls.severity!r}")
    parts = cls.doc_parts()
    if not (parts["what"] and parts["why"] and parts["fix"]):
        raise ValueError(f"{cls.id}: docstring needs a summary, a 'Why:' and a 'Fix:' paragraph")
    if not cls.VALID or not cls.INVALID:
        raise ValueError(f"{cls.id}: needs at least one VALID and one INVALID case")
    REGISTRY[cls.id] = cls
    return cls
