"""Module-level imports that register things: kept in isort order, each with its exact inverse.

* `AddModuleImport` / `RemoveModuleImport`: `from <module> import <NAME>` among the first-party
  (`vllm_omni.`) from-imports of a module, e.g. the eager `OMNI_PIPELINES` registry of 0.24+
  (`from vllm_omni.model_executor.models.<m>.pipeline import <M>_PIPELINE`).
* `AddImportAlias` / `RemoveImportAlias`: one name in the parenthesized import tuple of
  `tts_adapters/__init__.py` (`from vllm_omni.entrypoints.openai.tts_adapters import (audex, ...)`),
  whose import side effect registers each adapter; the tuple is kept alphabetical.

Only the anchor statements are parsed by libcst (see slices.py).
"""

from __future__ import annotations

import ast

import libcst as cst

from omnitts.scaffold.codemods.base import insert_element, insert_statement, remove_element, remove_statement
from omnitts.scaffold.codemods.hf_config import (
    import_module_name,
    import_statement,
    imported_names,
    sorted_import_position,
)
from omnitts.scaffold.codemods.slices import Edit, apply_edits, natural_key, parse_ast
from omnitts.scaffold.errors import ScaffoldError

FIRST_PARTY = "vllm_omni."


def _first_party_span(tree: ast.Module, rel: str) -> tuple[int, int]:
    nodes = [
        n
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and n.level == 0 and (n.module or "").startswith(FIRST_PARTY)
    ]
    if not nodes:
        raise ScaffoldError(f"{rel}: anchor (module-level `from vllm_omni... import` block) not found")
    # The contiguous run of import statements around them (the first-party isort block).
    first, last = nodes[0], nodes[-1]
    return first.lineno - 1, last.end_lineno


class AddModuleImport:
    """`from module import name` in isort position among the module's first-party from-imports."""

    @classmethod
    def apply_text(cls, source: str, rel: str, *, module: str, name: str) -> str:
        tree = parse_ast(source, rel)
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module == module and any(a.name == name for a in node.names):
                return source
        start, end = _first_party_span(tree, rel)

        def edit(parsed: cst.Module) -> cst.Module:
            stmts = list(parsed.body)
            position = sorted_import_position(stmts, module, FIRST_PARTY)
            new = import_statement(module, [name])
            return parsed.with_changes(body=insert_statement(stmts, position, new))

        return apply_edits(source, [Edit(start, end, edit)], rel)


class RemoveModuleImport:
    """The exact inverse of AddModuleImport (only an import of exactly that one name is removed)."""

    @classmethod
    def apply_text(cls, source: str, rel: str, *, module: str, name: str) -> str:
        tree = parse_ast(source, rel)
        target = next(
            (
                n
                for n in tree.body
                if isinstance(n, ast.ImportFrom) and n.module == module and [a.name for a in n.names] == [name]
            ),
            None,
        )
        if target is None:
            return source
        start, end = _first_party_span(tree, rel)

        def edit(parsed: cst.Module) -> cst.Module:
            stmts = list(parsed.body)
            index = next(
                i for i, s in enumerate(stmts) if import_module_name(s) == module and imported_names(s) == [name]
            )
            return parsed.with_changes(body=remove_statement(stmts, index))

        return apply_edits(source, [Edit(start, end, edit)], rel)


def _tuple_import(tree: ast.Module, module: str, rel: str) -> ast.ImportFrom:
    node = next((n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module == module), None)
    if node is None:
        raise ScaffoldError(
            f"{rel}: anchor `from {module} import (...)` not found; this tree's layout is not the one detected"
        )
    return node


def tuple_names(source: str, module: str) -> list[str]:
    """The names of the import tuple `from module import (...)` (the registered adapter modules)."""
    tree = ast.parse(source)
    node = next((n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module == module), None)
    return [a.name for a in node.names] if node else []


class AddImportAlias:
    """Add `name` to the parenthesized `from module import (...)` tuple, in alphabetical (isort) order."""

    @classmethod
    def apply_text(cls, source: str, rel: str, *, module: str, name: str) -> str:
        tree = parse_ast(source, rel)
        node = _tuple_import(tree, module, rel)
        if any(a.name == name for a in node.names):
            return source

        def edit(parsed: cst.Module) -> cst.Module:
            line = cst.ensure_type(parsed.body[0], cst.SimpleStatementLine)
            imp = cst.ensure_type(line.body[0], cst.ImportFrom)
            if imp.lpar is None:
                raise ScaffoldError(f"{rel}: `from {module} import ...` is not a parenthesized tuple")
            names = list(imp.names)
            key = natural_key(name)
            index = next((i for i, a in enumerate(names) if natural_key(a.name.value) > key), len(names))
            new = cst.ImportAlias(name=cst.Name(name))
            names = insert_element(names, index, new, imp.lpar.whitespace_after)
            return parsed.with_changes(body=[line.with_changes(body=[imp.with_changes(names=names)])])

        return apply_edits(source, [Edit(node.lineno - 1, node.end_lineno, edit)], rel)


class RemoveImportAlias:
    """The exact inverse of AddImportAlias."""

    @classmethod
    def apply_text(cls, source: str, rel: str, *, module: str, name: str) -> str:
        tree = parse_ast(source, rel)
        node = _tuple_import(tree, module, rel)
        if not any(a.name == name for a in node.names):
            return source
        if len(node.names) == 1:
            raise ScaffoldError(f"{rel}: {name} is the only name in `from {module} import (...)`; left alone")

        def edit(parsed: cst.Module) -> cst.Module:
            line = cst.ensure_type(parsed.body[0], cst.SimpleStatementLine)
            imp = cst.ensure_type(line.body[0], cst.ImportFrom)
            names = list(imp.names)
            index = next(i for i, a in enumerate(names) if a.name.value == name)
            return parsed.with_changes(
                body=[line.with_changes(body=[imp.with_changes(names=remove_element(names, index))])]
            )

        return apply_edits(source, [Edit(node.lineno - 1, node.end_lineno, edit)], rel)
