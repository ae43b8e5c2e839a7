"""Run libcst on the anchor only: locate anchors with `ast`, parse and edit just their lines.

`serving_speech.py` has 2,500-4,300 lines; parsing it whole with libcst takes about a second per
codemod, while `ast` finds every anchor in ~50 ms. An anchor (a module statement, or a method of a
class) is cut out by its line span, parsed by libcst on its own (a method inside a stand-in
`class _Slice:` so that its indentation is kept byte for byte), edited by the codemod and spliced
back. Everything outside the span is untouched by construction, which is also what keeps the
patches additions-only.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from omnitts.scaffold.errors import ScaffoldError

WRAPPER = "class _Slice:\n"


def parse_ast(source: str, rel: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ScaffoldError(f"{rel} does not parse ({exc.msg} at line {exc.lineno}); nothing written") from exc


def first_line(node: ast.stmt) -> int:
    """1-based first line of a statement, decorators included."""
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decorators)])


def assigned_names(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def module_assignment(tree: ast.Module, name: str) -> ast.stmt | None:
    return next((n for n in tree.body if name in assigned_names(n)), None)


def class_def(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next(
        (n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None
    )


@dataclass
class Edit:
    """Replace lines [start, end) (0-based) with what `transform` makes of their libcst module."""

    start: int
    end: int
    transform: Callable[[cst.Module], cst.Module]
    in_class: bool = False


def apply_edits(source: str, edits: list[Edit], rel: str) -> str:
    """Apply non-overlapping slice edits (bottom-up, so earlier spans keep their line numbers)."""
    lines = source.splitlines(keepends=True)
    ordered = sorted(edits, key=lambda e: e.start, reverse=True)
    for later, earlier in zip(ordered, ordered[1:], strict=False):
        if earlier.end > later.start:
            raise ScaffoldError(f"internal error: overlapping edits in {rel}")
    for edit in ordered:
        text = "".join(lines[edit.start : edit.end])
        if edit.in_class:
            text = WRAPPER + text
        try:
            module = cst.parse_module(text)
        except cst.ParserSyntaxError as exc:
            raise ScaffoldError(
                f"internal error: {rel} lines {edit.start + 1}-{edit.end} do not parse alone ({exc.message})"
            ) from exc
        code = edit.transform(module).code
        if edit.in_class:
            if not code.startswith(WRAPPER):
                raise ScaffoldError(f"internal error: slice wrapper of {rel} lost")
            code = code[len(WRAPPER) :]
        lines[edit.start : edit.end] = code.splitlines(keepends=True)
    return "".join(lines)


def class_body(module: cst.Module) -> list[cst.BaseStatement]:
    """The statements of the stand-in class of a method slice."""
    return list(cst.ensure_type(module.body[0], cst.ClassDef).body.body)


def with_class_body(module: cst.Module, body: list[cst.BaseStatement]) -> cst.Module:
    cls = cst.ensure_type(module.body[0], cst.ClassDef)
    return module.with_changes(body=[cls.with_changes(body=cls.body.with_changes(body=body))])


def edit_method(module: cst.Module, name: str, change: Callable[[cst.FunctionDef], cst.FunctionDef]) -> cst.Module:
    body = class_body(module)
    for i, stmt in enumerate(body):
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            body[i] = change(stmt)
            return with_class_body(module, body)
    raise ScaffoldError(f"internal error: method {name} not in its slice")


def natural_key(text: str) -> list:
    """Natural, case-insensitive order (how ruff's isort compares module and member names)."""
    import re

    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text.lower())]
