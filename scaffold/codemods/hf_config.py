"""HF config registration in `_register_omni_hf_configs()` (vllm_omni/engine/arg_utils.py, 0.18+).

The function imports each config class inside a `try:` and registers `(model_type, ConfigClass)`
pairs from a list literal in a `for` loop. Both edits are additions: one import (kept in isort order
among its siblings) and one pair appended to the list.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod import VisitorBasedCodemodCommand

from omnitts.scaffold.codemods.base import append_element, literal
from omnitts.scaffold.errors import ScaffoldError

FUNCTION = "_register_omni_hf_configs"


def _import_module_name(stmt: cst.BaseStatement) -> str | None:
    if m.matches(stmt, m.SimpleStatementLine(body=[m.ImportFrom()])):
        node = stmt.body[0]
        return cst.Module([]).code_for_node(node.module) if node.module else None
    return None


class RegisterHfConfig(VisitorBasedCodemodCommand):
    DESCRIPTION = "Register a new HF config class with AutoConfig and vLLM's config registry."
    ANCHOR = f"def {FUNCTION}() with a `for model_type, config_cls in [...]` loop"

    def on_visit(self, node: cst.CSTNode) -> bool:
        # The anchor is a module-level function, edited whole in leave_FunctionDef.
        super().on_visit(node)
        return isinstance(node, cst.Module)

    def __init__(self, context, model_type: str, module: str, class_name: str) -> None:
        super().__init__(context)
        self.model_type, self.config_module, self.class_name = model_type, module, class_name
        self.anchor_found = False

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
        if self.model_type in pairs:
            if pairs[self.model_type] == self.class_name:
                return updated_node
            raise ScaffoldError(f"model type {self.model_type!r} is already registered with {pairs[self.model_type]}")
        pair = cst.Element(cst.parse_expression(f'("{self.model_type}", {self.class_name})'))
        new_iter = loop.iter.with_changes(elements=append_element(list(loop.iter.elements), pair, loop.iter.lbracket.whitespace_after))
        body[loop_i] = loop.with_changes(iter=new_iter)
        body[try_i] = self._add_import(body[try_i])
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))

    def _add_import(self, try_node: cst.Try) -> cst.Try:
        stmts = list(try_node.body.body)
        new = cst.parse_statement(f"from {self.config_module} import {self.class_name}\n")
        modules = [(i, _import_module_name(s)) for i, s in enumerate(stmts)]
        first_party = [(i, mod) for i, mod in modules if mod and mod.startswith("vllm_omni.")]
        if not first_party:
            raise ScaffoldError(f"{FUNCTION}: no vllm_omni config imports found in its try block")
        # isort order within the first-party block: insert before the first module that sorts after ours.
        position = next((i for i, mod in first_party if mod > self.config_module), first_party[-1][0] + 1)
        if position < len(stmts):  # the blank line that opens the block stays at the block's start
            new = new.with_changes(leading_lines=stmts[position].leading_lines)
            stmts[position] = stmts[position].with_changes(leading_lines=[])
        stmts.insert(position, new)
        return try_node.with_changes(body=try_node.body.with_changes(body=stmts))
