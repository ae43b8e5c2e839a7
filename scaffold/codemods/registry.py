"""Module-level registry dicts: `_OMNI_MODELS` (registry.py), `_OMNI_PIPELINES` / `OMNI_PIPELINES`.

`AddDictTupleEntry` adds `"key": ("a", "b", ...)` (the 0.14+ model registry and the 0.20-0.22 lazy
pipeline registry), `AddDictNameEntry` adds `"key": NAME` (the 0.24+ eager `OMNI_PIPELINES`), and
`RemoveDictEntry` is the exact inverse of both. Each edits only the dict's own statement (sliced).
"""

from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m
from libcst.codemod import VisitorBasedCodemodCommand

from omnitts.scaffold.codemods.base import append_element, literal, remove_element
from omnitts.scaffold.codemods.slices import Edit, apply_edits, first_line, module_assignment, parse_ast
from omnitts.scaffold.errors import ScaffoldError


def _entry_value(value: cst.BaseExpression) -> tuple[str, ...] | str | None:
    if isinstance(value, cst.Tuple):
        parts = tuple(literal(e.value) for e in value.elements)
        return parts if all(p is not None for p in parts) else None
    if isinstance(value, cst.Name):
        return value.value
    return None


def read_entries(dict_node: cst.Dict) -> dict[str, tuple[str, ...] | str | None]:
    return {literal(e.key): _entry_value(e.value) for e in dict_node.elements if isinstance(e, cst.DictElement)}


def tuple_entry(key: str, values: tuple[str, ...], indent: str = "    ") -> cst.DictElement:
    """A ruff-formatted `"key": ("a", "b", ...)` element of a module-level dict (one value per line)."""
    inner = "".join(f'{indent * 2}"{v}",\n' for v in values)
    value = cst.parse_expression(f"(\n{inner}{indent})")
    return cst.DictElement(key=cst.SimpleString(f'"{key}"'), value=value)


def _dict_slice(source: str, rel: str, dict_name: str) -> tuple[ast.Module, int, int]:
    tree = parse_ast(source, rel)
    node = module_assignment(tree, dict_name)
    if node is None or not isinstance(node.value, ast.Dict):
        raise ScaffoldError(
            f"{rel}: anchor `{dict_name} = {{...}}` not found; this tree's layout is not the one detected"
        )
    return tree, first_line(node) - 1, node.end_lineno


class _DictCommand(VisitorBasedCodemodCommand):
    DESCRIPTION = "Edit one entry of a module-level registry dict."
    ANCHOR = "a module-level dict literal"

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Anchors are module-level statements; nothing below them needs visiting (much faster).
        super().on_visit(node)
        return isinstance(node, (cst.Module, cst.SimpleStatementLine))

    def __init__(self, context, **kwargs) -> None:
        super().__init__(context)
        self._configure(**kwargs)

    def _configure(self, dict_name: str) -> None:
        self.dict_name = dict_name
        self.anchor_found = False
        self.ANCHOR = f"`{dict_name} = {{...}}`"

    @classmethod
    def _edit_slice(cls, module: cst.Module, rel: str, **kwargs) -> cst.Module:
        """The slice holds just the dict's statement: edit it without the codemod machinery.

        (Constructing a libcst visitor introspects all its methods, ~80 ms a time on a busy machine.)
        """
        command = object.__new__(cls)
        command._configure(**kwargs)
        line = cst.ensure_type(module.body[0], cst.SimpleStatementLine)
        small = line.body[0]
        new_small = command._patch(small, small)
        if not command.anchor_found:
            raise ScaffoldError(f"{rel}: anchor {command.ANCHOR} not found; this tree's layout is not the one detected")
        return module.with_changes(body=[line.with_changes(body=[new_small])])

    @classmethod
    def first_element(cls, keys: list[str | None], **kwargs) -> int:
        """Index of the first dict element the edit needs to see (earlier ones are left out of the slice)."""
        return max(len(keys) - 1, 0)

    @classmethod
    def settled(cls, entries: dict, **kwargs) -> bool:
        """True when the edit has nothing to do (checked on the whole dict, before slicing)."""
        return False

    @classmethod
    def apply_text(cls, source: str, rel: str, **kwargs) -> str:
        tree, start, end = _dict_slice(source, rel, kwargs["dict_name"])
        if cls.settled(_entries(module_assignment(tree, kwargs["dict_name"])), **kwargs):
            return source
        node = module_assignment(tree, kwargs["dict_name"]).value
        keys = [k.value if isinstance(k, ast.Constant) else None for k in node.keys]
        index = cls.first_element(keys, **kwargs)
        lines = source.splitlines(keepends=True)
        if (
            0 < index < len(node.keys)
            and node.keys[index] is not None  # `**spread` has no key: the whole dict is parsed instead
            and _starts_line(lines, node.keys[index])
            and node.values[index - 1].end_lineno < node.keys[index].lineno
        ):
            # Only the tail of a long dict is parsed: `NAME = {` + the elements from `index` on.
            head = f"{kwargs['dict_name']} = {{\n"
            tail_start = node.keys[index].lineno - 1

            text = head + "".join(lines[tail_start:end])
            code = cls._edit_slice(cst.parse_module(text), rel, **kwargs).code
            if not code.startswith(head):
                raise ScaffoldError(f"internal error: {rel} dict slice lost its head")
            return "".join(lines[:tail_start]) + code[len(head) :] + "".join(lines[end:])
        return apply_edits(source, [Edit(start, end, lambda module: cls._edit_slice(module, rel, **kwargs))], rel)

    def _is_anchor(self, node) -> bool:
        target = (
            node.target
            if isinstance(node, cst.AnnAssign)
            else (node.targets[0].target if len(node.targets) == 1 else None)
        )
        return m.matches(target, m.Name(self.dict_name)) and isinstance(node.value, cst.Dict)

    def _patch(self, original, updated):
        if not self._is_anchor(original):
            return updated
        self.anchor_found = True
        elements = self.edit(list(updated.value.elements), read_entries(original.value), updated.value)
        if elements is None:
            return updated
        return updated.with_changes(value=updated.value.with_changes(elements=elements))

    def edit(self, elements, entries, dict_node):  # pragma: no cover - abstract
        raise NotImplementedError

    def leave_Assign(self, original_node, updated_node):
        return self._patch(original_node, updated_node)

    def leave_AnnAssign(self, original_node, updated_node):
        return self._patch(original_node, updated_node)


class AddDictTupleEntry(_DictCommand):
    """Add `"key": (values...)` to the module-level dict assigned to `dict_name`.

    Idempotent: an identical entry is left alone. A different entry under the same key is refused,
    because two models cannot share an architecture or a pipeline key.
    """

    DESCRIPTION = "Add one tuple entry to a module-level registry dict."

    def _configure(self, dict_name: str, key: str, values: tuple[str, ...], what: str) -> None:
        super()._configure(dict_name)
        self.key, self.values, self.what = key, tuple(values), what

    @classmethod
    def settled(cls, entries: dict, **kwargs) -> bool:
        key, value = kwargs["key"], kwargs.get("values", kwargs.get("value"))
        value = tuple(value) if isinstance(value, list) else value
        if key not in entries:
            return False
        if entries[key] == value:
            return True
        raise ScaffoldError(f"{kwargs['what']} {key!r} already exists in {kwargs['dict_name']} with {entries[key]}")

    def new_element(self) -> cst.DictElement:
        return tuple_entry(self.key, self.values)

    def edit(self, elements, entries, dict_node):
        if self.key in entries:
            if entries[self.key] == self.values:
                return None
            raise ScaffoldError(f"{self.what} {self.key!r} already exists in {self.dict_name} with {entries[self.key]}")
        return append_element(elements, self.new_element(), dict_node.lbrace.whitespace_after)


class AddDictNameEntry(AddDictTupleEntry):
    """Add `"key": NAME` (a name imported at module level), e.g. `"my_tts": MY_TTS_PIPELINE`."""

    DESCRIPTION = "Add one name entry to a module-level registry dict."

    def _configure(self, dict_name: str, key: str, value: str, what: str) -> None:
        super()._configure(dict_name, key, (), what)
        self.values = value

    def new_element(self) -> cst.DictElement:
        return cst.DictElement(key=cst.SimpleString(f'"{self.key}"'), value=cst.Name(self.values))


class RemoveDictEntry(_DictCommand):
    """The inverse of AddDictTupleEntry / AddDictNameEntry: drop `key` when it holds `value`."""

    DESCRIPTION = "Remove one entry of a module-level registry dict."

    def _configure(self, dict_name: str, key: str, value=None, what: str = "entry") -> None:
        super()._configure(dict_name)
        self.key, self.value, self.what = key, tuple(value) if isinstance(value, list) else value, what

    @classmethod
    def settled(cls, entries: dict, **kwargs) -> bool:
        key, value = kwargs["key"], kwargs.get("value")
        value = tuple(value) if isinstance(value, list) else value
        if key not in entries:
            return True
        if value is not None and entries[key] != value:
            what = kwargs.get("what", "entry")
            raise ScaffoldError(f"{what} {key!r} in {kwargs['dict_name']} is {entries[key]}, not {value}; left alone")
        return False

    @classmethod
    def first_element(cls, keys: list[str | None], **kwargs) -> int:
        # The element before the removed one may take its trailing comma back.
        index = keys.index(kwargs["key"]) if kwargs["key"] in keys else len(keys) - 1
        return max(index - 1, 0)

    def edit(self, elements, entries, dict_node):
        if self.key not in entries:
            return None
        if self.value is not None and entries[self.key] != self.value:
            raise ScaffoldError(
                f"{self.what} {self.key!r} in {self.dict_name} is {entries[self.key]}, not {self.value}; left alone"
            )
        index = next(i for i, e in enumerate(elements) if isinstance(e, cst.DictElement) and literal(e.key) == self.key)
        return remove_element(elements, index)


def _entries(node: ast.stmt) -> dict[str, tuple[str, ...] | str | None]:
    out: dict[str, tuple[str, ...] | str | None] = {}
    for key, value in zip(node.value.keys, node.value.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        if isinstance(value, ast.Tuple) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
        ):
            out[key.value] = tuple(e.value for e in value.elts)
        elif isinstance(value, ast.Name):
            out[key.value] = value.id
        else:
            out[key.value] = None
    return out


def _starts_line(lines: list[str], key: ast.expr) -> bool:
    """The dict element begins its line (only whitespace before its key)."""
    line = lines[key.lineno - 1]
    return line[: key.col_offset].strip() == ""


def registered(source: str, dict_name: str) -> dict[str, tuple[str, ...] | str | None]:
    """Entries of `dict_name` in `source` (used for refusals, `check` and `remove`), read with `ast`."""
    node = module_assignment(ast.parse(source), dict_name)
    if node is None or not isinstance(node.value, ast.Dict):
        return {}
    return _entries(node)
