"""`_OMNI_MODELS` in vllm_omni/model_executor/models/registry.py: one entry per architecture."""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m
from libcst.codemod import VisitorBasedCodemodCommand

from omnitts.scaffold.codemods.base import append_element, literal
from omnitts.scaffold.errors import ScaffoldError


def _entry_value(value: cst.BaseExpression) -> tuple[str, ...] | None:
    if isinstance(value, cst.Tuple):
        parts = tuple(literal(e.value) for e in value.elements)
        return parts if all(p is not None for p in parts) else None
    return None


def read_entries(dict_node: cst.Dict) -> dict[str, tuple[str, ...] | None]:
    return {literal(e.key): _entry_value(e.value) for e in dict_node.elements if isinstance(e, cst.DictElement)}


def tuple_entry(key: str, values: tuple[str, ...], indent: str = "    ") -> cst.DictElement:
    """A ruff-formatted `"key": ("a", "b", ...)` element of a module-level dict (one value per line)."""
    inner = "".join(f'{indent * 2}"{v}",\n' for v in values)
    value = cst.parse_expression(f"(\n{inner}{indent})")
    return cst.DictElement(key=cst.SimpleString(f'"{key}"'), value=value)


class AddDictTupleEntry(VisitorBasedCodemodCommand):
    """Add `"key": (values...)` to the module-level dict assigned to `dict_name`.

    Idempotent: an identical entry is left alone. A different entry under the same key is refused,
    because two models cannot share an architecture or a pipeline key.
    """

    DESCRIPTION = "Add one tuple entry to a module-level registry dict."
    ANCHOR = "a module-level dict literal"

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Anchors are module-level statements; nothing below them needs visiting (much faster).
        super().on_visit(node)
        return isinstance(node, (cst.Module, cst.SimpleStatementLine))

    def __init__(self, context, dict_name: str, key: str, values: tuple[str, ...], what: str) -> None:
        super().__init__(context)
        self.dict_name, self.key, self.values, self.what = dict_name, key, values, what
        self.anchor_found = False
        self.ANCHOR = f"`{dict_name} = {{...}}`"

    def _is_anchor(self, node) -> bool:
        target = node.target if isinstance(node, cst.AnnAssign) else (node.targets[0].target if len(node.targets) == 1 else None)
        return m.matches(target, m.Name(self.dict_name)) and isinstance(node.value, cst.Dict)

    def _patch(self, original, updated):
        if not self._is_anchor(original):
            return updated
        self.anchor_found = True
        entries = read_entries(original.value)
        if self.key in entries:
            if entries[self.key] == self.values:
                return updated
            raise ScaffoldError(f"{self.what} {self.key!r} already exists in {self.dict_name} with {entries[self.key]}")
        new = tuple_entry(self.key, self.values)
        elements = append_element(list(updated.value.elements), new, updated.value.lbrace.whitespace_after)
        return updated.with_changes(value=updated.value.with_changes(elements=elements))

    def leave_Assign(self, original_node, updated_node):
        return self._patch(original_node, updated_node)

    def leave_AnnAssign(self, original_node, updated_node):
        return self._patch(original_node, updated_node)


def registered(source: str, dict_name: str) -> dict[str, tuple[str, ...] | None]:
    """Entries of `dict_name` in `source` (used for refusals and by `check`)."""
    for stmt in cst.parse_module(source).body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                target = small.target if isinstance(small, cst.AnnAssign) else small.targets[0].target if isinstance(small, cst.Assign) else None
                if m.matches(target, m.Name(dict_name)) and isinstance(small.value, cst.Dict):
                    return read_entries(small.value)
    return {}
