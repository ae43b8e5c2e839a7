"""One file under lint: text, parsed tree, kind, and the lazily built module index rules share."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cached_property

from omnitts.knowledge.treefacts import TreeFacts
from omnitts.validators.static.rule import CODE, CONFIG, CONSUMER, MODEL

# Path components that make a file a consumer of engine outputs (tests, examples, benchmarks).
_CONSUMER_DIRS = {"tests", "test", "examples", "example", "benchmarks", "benchmark", "apps", "demo", "demos"}
# A hook definition at the start of a line (after indentation and an optional `async`). Searched as
# the literal `def ...(` first, then the line's prefix is checked: a pattern anchored at `^` tries every
# line start and costs ten times more on a whole package.
_HOOK_DEF = re.compile(
    r"def[ \t]+(?:forward|make_omni_output|on_requests_finished|preprocess|postprocess|compute_logits)[ \t]*\("
)
_DEF_PREFIX = re.compile(r"[ \t\f]*(?:async[ \t]+)?\Z")


def _defines_hook(text: str) -> bool:
    for m in _HOOK_DEF.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if _DEF_PREFIX.match(text, start, m.start()):
            return True
    return False


def classify(rel: str, text: str) -> str:
    """``consumer`` for tests/examples/benchmarks, ``model`` for modules defining a model hook,
    ``config`` for YAML, else ``code``."""
    if rel.endswith((".yaml", ".yml")):
        return CONFIG
    parts = rel.split("/")
    name = parts[-1]
    if _CONSUMER_DIRS.intersection(parts[:-1]) or name.startswith("test_") or name.endswith("_test.py"):
        return CONSUMER
    if name in ("end2end.py", "conftest.py") or name.startswith(("bench_", "benchmark_")):
        return CONSUMER
    if _defines_hook(text):
        return MODEL
    return CODE


@dataclass
class SourceFile:
    path: str  # as displayed in findings
    rel: str  # posix path relative to the tree root (or to the lint root) for path-based decisions
    text: str
    tree: ast.Module
    facts: TreeFacts = field(default_factory=TreeFacts)
    extra_entries: frozenset = frozenset()  # per-step entry points other files of the package call

    @cached_property
    def kind(self) -> str:
        return classify(self.rel, self.text)

    @cached_property
    def lines(self) -> list[str]:
        # Split on "\n" only (the engine normalised \r\n and \r): str.splitlines() also breaks at form
        # feeds, \x1c-\x1e, \x85 and U+2028/9, which Python's tokenizer does not, and would shift every
        # line number after one of them.
        lines = self.text.split("\n")
        if lines and not lines[-1]:
            lines.pop()
        return lines

    @cached_property
    def index(self):
        from omnitts.validators.static.index import ModuleIndex

        return ModuleIndex(self.tree, self.lines, self.extra_entries, release=self.facts.version)

    def node_text(self, node: ast.AST) -> str:
        """Source lines a node spans (cached): the cheap textual prefilter rules run per function."""
        cache = self.__dict__.setdefault("_node_text", {})
        key = id(node)
        if key not in cache:
            cache[key] = "\n".join(self.lines[node.lineno - 1 : node.end_lineno])
        return cache[key]

    def segment(self, node: ast.AST) -> str:
        """Source text of a node (ast.get_source_segment re-splits the whole file on every call)."""
        try:
            lines = self.lines[node.lineno - 1 : node.end_lineno]
            if not lines:
                return ""
            if len(lines) == 1:
                return _cols(lines[0], node.col_offset, node.end_col_offset)
            return "\n".join(
                [_cols(lines[0], node.col_offset, None), *lines[1:-1], _cols(lines[-1], 0, node.end_col_offset)]
            )
        except (AttributeError, TypeError):
            return ""


def _cols(line: str, start: int, end: int | None) -> str:
    raw = line.encode("utf-8")
    return raw[start:end].decode("utf-8", errors="replace")
