"""HF config registration in `_register_omni_hf_configs()` (vllm_omni/engine/arg_utils.py, 0.18+).

The function imports each config class inside a `try:` and registers `(model_type, ConfigClass)`
pairs from a list literal in a `for` loop. Both edits are additions: one import (kept in isort order
among its siblings, wrapped in parentheses the way ruff-format does when it is too long) and one pair
appended to the list. `UnregisterHfConfig` is the exact inverse. Only the function is parsed.
"""

from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m
from libcst.codemod import VisitorBasedCodemodCommand

from omnitts.scaffold.codemods.base import (
    append_element,
    insert_statement,
    literal,
    remove_element,
    remove_statement,
)
from omnitts.scaffold.codemods.slices import Edit, apply_edits, first_line, natural_key, parse_ast
from omnitts.scaffold.errors import ScaffoldError

FUNCTION = "_register_omni_hf_configs"
LINE_LENGTH = 120


def import_statement(
    module: str, names: list[str], indent: str = "", line_length: int = LINE_LENGTH
) -> cst.SimpleStatementLine:
    """`from module import a, b` as ruff-format writes it at this indentation (parenthesized when too long)."""
    one_line = f"from {module} import {', '.join(names)}"
    if len(indent) + len(one_line) <= line_length:
        return cst.ensure_type(cst.parse_statement(one_line + "\n"), cst.SimpleStatementLine)
    inner = "".join(f"    {n},\n" for n in names)
    return cst.ensure_type(cst.parse_statement(f"from {module} import (\n{inner})\n"), cst.SimpleStatementLine)


def import_module_name(stmt: cst.BaseStatement) -> str | None:
    if m.matches(stmt, m.SimpleStatementLine(body=[m.ImportFrom()])):
        node = stmt.body[0]
        return cst.Module([]).code_for_node(node.module) if node.module and not node.relative else None
    return None


def imported_names(stmt: cst.BaseStatement) -> list[str]:
    node = stmt.body[0]
    if isinstance(node.names, cst.ImportStar):
        return ["*"]
    return [cst.Module([]).code_for_node(a.name) for a in node.names]


def sorted_import_position(stmts: list, module: str, prefix: str) -> int | None:
    """Where `from module import ...` goes among the `prefix*` from-imports of a block (isort order)."""
    first_party = [(i, mod) for i, s in enumerate(stmts) if (mod := import_module_name(s)) and mod.startswith(prefix)]
    if not first_party:
        return None
    key = natural_key(module)
    return next((i for i, mod in first_party if natural_key(mod) > key), first_party[-1][0] + 1)


def _function_slice(source: str, rel: str) -> tuple[int, int]:
    tree = parse_ast(source, rel)
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION), None)
    if node is None:
        raise ScaffoldError(f"{rel}: anchor def {FUNCTION}() not found; this tree's layout is not the one detected")
    return first_line(node) - 1, node.end_lineno


class _HfConfigCommand(VisitorBasedCodemodCommand):
    DESCRIPTION = "Edit the HF config registration of one model."
    ANCHOR = f"def {FUNCTION}() with a `for model_type, config_cls in [...]` loop"

    def __init__(self, context, **kwargs) -> None:
        super().__init__(context)
        self._configure(**kwargs)

    def _configure(self, model_type: str, module: str, class_name: str) -> None:
        self.model_type, self.config_module, self.class_name = model_type, module, class_name
        self.anchor_found = False

    @classmethod
    def _edit_slice(cls, parsed: cst.Module, rel: str, **kwargs) -> cst.Module:
        """The slice holds just the function: edit it without the codemod machinery (see registry.py)."""
        command = object.__new__(cls)
        command._configure(**kwargs)
        func = cst.ensure_type(parsed.body[0], cst.FunctionDef)
        new = command.leave_FunctionDef(func, func)
        if not command.anchor_found:
            raise ScaffoldError(f"{rel}: anchor {cls.ANCHOR} not found; this tree's layout is not the one detected")
        return parsed.with_changes(body=[new])

    def on_visit(self, node: cst.CSTNode) -> bool:
        # The anchor is a module-level function, edited whole in leave_FunctionDef.
        super().on_visit(node)
        return isinstance(node, cst.Module)

    @classmethod
    def apply_text(cls, source: str, rel: str, **kwargs) -> str:
        start, end = _function_slice(source, rel)
        return apply_edits(source, [Edit(start, end, lambda parsed: cls._edit_slice(parsed, rel, **kwargs))], rel)

    def leave_FunctionDef(self, original_node, updated_node):
        if original_node.name.value != FUNCTION:
            return updated_node
        body = list(updated_node.body.body)
        loop_i = next((i for i, s in enumerate(body) if isinstance(s, cst.For) and isinstance(s.iter, cst.List)), None)
        try_i = next((i for i, s in enumerate(body) if isinstance(s, cst.Try)), None)
        if loop_i is None or try_i is None:
            return updated_node
        self.anchor_found = True
        loop = body[loop_i]
        pairs = {}
        for el in loop.iter.elements:
            if isinstance(el.value, cst.Tuple) and len(el.value.elements) == 2:
                key = literal(el.value.elements[0].value)
                cls = el.value.elements[1].value
                pairs[key] = cls.value if isinstance(cls, cst.Name) else None
        result = self.edit(body, loop_i, try_i, pairs)
        if result is None:
            return updated_node
        return updated_node.with_changes(body=updated_node.body.with_changes(body=result))

    def edit(self, body, loop_i, try_i, pairs):  # pragma: no cover - abstract
        raise NotImplementedError


class RegisterHfConfig(_HfConfigCommand):
    DESCRIPTION = "Register a new HF config class with AutoConfig and vLLM's config registry."

    def edit(self, body, loop_i, try_i, pairs):
        if self.model_type in pairs:
            if pairs[self.model_type] == self.class_name:
                return None
            raise ScaffoldError(f"model type {self.model_type!r} is already registered with {pairs[self.model_type]}")
        loop = body[loop_i]
        pair = cst.Element(cst.parse_expression(f'("{self.model_type}", {self.class_name})'))
        new_iter = loop.iter.with_changes(
            elements=append_element(list(loop.iter.elements), pair, loop.iter.lbracket.whitespace_after)
        )
        body[loop_i] = loop.with_changes(iter=new_iter)
        body[try_i] = self._add_import(body[try_i])
        return body

    def _add_import(self, try_node: cst.Try) -> cst.Try:
        stmts = list(try_node.body.body)
        position = sorted_import_position(stmts, self.config_module, "vllm_omni.")
        if position is None:
            raise ScaffoldError(f"{FUNCTION}: no vllm_omni config imports found in its try block")
        new = import_statement(self.config_module, [self.class_name], indent=" " * 8)
        return try_node.with_changes(body=try_node.body.with_changes(body=insert_statement(stmts, position, new)))


class UnregisterHfConfig(_HfConfigCommand):
    """The exact inverse of RegisterHfConfig."""

    DESCRIPTION = "Remove one model's HF config registration."

    def edit(self, body, loop_i, try_i, pairs):
        if self.model_type not in pairs:
            return None
        if pairs[self.model_type] != self.class_name:
            raise ScaffoldError(
                f"model type {self.model_type!r} is registered with {pairs[self.model_type]}, not {self.class_name}"
            )
        loop = body[loop_i]
        elements = list(loop.iter.elements)
        index = next(
            i
            for i, el in enumerate(elements)
            if isinstance(el.value, cst.Tuple) and literal(el.value.elements[0].value) == self.model_type
        )
        body[loop_i] = loop.with_changes(iter=loop.iter.with_changes(elements=remove_element(elements, index)))
        try_node = body[try_i]
        stmts = list(try_node.body.body)
        for i, stmt in enumerate(stmts):
            if import_module_name(stmt) == self.config_module and imported_names(stmt) == [self.class_name]:
                body[try_i] = try_node.with_changes(body=try_node.body.with_changes(body=remove_statement(stmts, i)))
                break
        return body


def registered_configs(source: str) -> dict[str, tuple[str | None, str | None]]:
    """model_type -> (config class, module it is imported from) in `_register_omni_hf_configs()`, read with `ast`."""
    tree = ast.parse(source)
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == FUNCTION), None)
    if func is None:
        return {}
    modules: dict[str, str] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                modules[alias.asname or alias.name] = node.module
    out: dict[str, tuple[str | None, str | None]] = {}
    for node in func.body:
        if isinstance(node, ast.For) and isinstance(node.iter, ast.List):
            for elt in node.iter.elts:
                if isinstance(elt, ast.Tuple) and len(elt.elts) == 2 and isinstance(elt.elts[0], ast.Constant):
                    cls = elt.elts[1].id if isinstance(elt.elts[1], ast.Name) else None
                    out[elt.elts[0].value] = (cls, modules.get(cls) if cls else None)
    return out
