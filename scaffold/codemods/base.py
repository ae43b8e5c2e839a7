"""Shared pieces of the codemods: running a command on source text, and anchored list/dict edits.

Every addition has an exact inverse here (`remove_element` undoes `append_element` / `insert_element`
byte for byte), which is what `omnitts-scaffold remove` is built on.
"""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor

from omnitts.scaffold.errors import ScaffoldError


def run_codemod(command_cls: type[VisitorBasedCodemodCommand], source: str, rel: str, **kwargs) -> str:
    """Apply one codemod command to `source`; refusals surface as ScaffoldError naming `rel`.

    Commands with an `apply_text` classmethod locate their anchors with `ast` and run libcst on the
    anchor's lines only (see slices.py); the others get the whole parsed module.
    """
    apply_text = getattr(command_cls, "apply_text", None)
    if apply_text is not None:
        return apply_text(source, rel, **kwargs)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise ScaffoldError(f"{rel} does not parse ({exc.message} at line {exc.raw_line}); nothing written") from exc
    return transform(command_cls, module, rel, **kwargs).code


def transform(command_cls: type[VisitorBasedCodemodCommand], parsed: cst.Module, rel: str, /, **kwargs) -> cst.Module:
    """Run a command on an already parsed module (a whole file or one anchor's slice)."""
    context = CodemodContext(filename=rel)
    command = command_cls(context, **kwargs)
    # `Codemod.transform_module` first deep-copies the tree into a MetadataWrapper. Our commands
    # declare no metadata and the tree was parsed here, so run the visitor directly, then the import
    # pass that `CodemodCommand` would run (see docs/decisions.md).
    if command.METADATA_DEPENDENCIES:
        new_module = command.transform_module(parsed)
    else:
        new_module = command.transform_module_impl(parsed)
        if AddImportsVisitor.CONTEXT_KEY in context.scratch:
            new_module = AddImportsVisitor(context).transform_module(new_module)
    if not getattr(command, "anchor_found", True):
        raise ScaffoldError(f"{rel}: anchor {command.ANCHOR} not found; this tree's layout is not the one detected")
    return new_module


def literal(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal node, else None."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    return None


def _clean(ws):
    """Keep a separator's newline and indent, drop comments that belong to a neighbour."""
    if isinstance(ws, cst.ParenthesizedWhitespace):
        return cst.ParenthesizedWhitespace(indent=ws.indent, last_line=ws.last_line)
    return ws


def append_element(elements: list, new, opening_ws: cst.BaseParenthesizableWhitespace):
    """Append `new` to a bracketed sequence of Element/DictElement/ImportAlias nodes, keeping the layout.

    The previous last element takes the comma that separates elements (with its newline and indent),
    and the new element takes over the last element's trailing comma, so the result reads as if the
    entry had always been there (ruff-format leaves it unchanged).
    """
    if not elements:
        raise ScaffoldError("internal error: appending to an empty literal is not supported")
    last = elements[-1]
    template = _clean(elements[-2].comma.whitespace_after if len(elements) >= 2 else opening_ws)
    separator = cst.Comma(whitespace_after=template)
    trailing = last.comma if isinstance(last.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
    return [*elements[:-1], last.with_changes(comma=separator), new.with_changes(comma=trailing)]


def insert_element(elements: list, index: int, new, opening_ws: cst.BaseParenthesizableWhitespace):
    """Insert `new` before `elements[index]` (sorted sequences); at the end it is `append_element`."""
    if index >= len(elements):
        return append_element(elements, new, opening_ws)
    if index == 0:
        template = elements[0].comma.whitespace_after if len(elements) >= 2 else opening_ws
    else:
        template = elements[index - 1].comma.whitespace_after
    return [*elements[:index], new.with_changes(comma=cst.Comma(whitespace_after=_clean(template))), *elements[index:]]


def remove_element(elements: list, index: int) -> list:
    """The exact inverse of `append_element` / `insert_element` for the element at `index`.

    The last element's comma is the sequence's trailing comma (taken from the element it followed),
    so it goes back to that element; any other element simply leaves.
    """
    if index == len(elements) - 1 and index > 0:
        previous = elements[index - 1]
        return [*elements[: index - 1], previous.with_changes(comma=elements[index].comma)]
    return [*elements[:index], *elements[index + 1 :]]


def remove_statement(stmts: list, index: int) -> list:
    """Remove a statement that took over its successor's leading lines (blank line / comments) when it was inserted."""
    out = list(stmts)
    gone = out.pop(index)
    if index < len(out) and gone.leading_lines:
        out[index] = out[index].with_changes(leading_lines=[*gone.leading_lines, *out[index].leading_lines])
    return out


def insert_statement(stmts: list, index: int, new) -> list:
    """Insert a statement before `stmts[index]`; it takes over that statement's leading lines.

    (A block's opening blank line stays at the block's start.)
    """
    out = list(stmts)
    if index < len(out):
        new = new.with_changes(leading_lines=out[index].leading_lines)
        out[index] = out[index].with_changes(leading_lines=[])
    out.insert(index, new)
    return out
