"""Shared pieces of the codemods: running a command on source text, and anchored dict/list edits."""

from __future__ import annotations

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor

from omnitts.scaffold.errors import ScaffoldError


def run_codemod(command_cls: type[VisitorBasedCodemodCommand], source: str, rel: str, **kwargs) -> str:
    """Apply one codemod command to `source`; refusals surface as ScaffoldError naming `rel`."""
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        raise ScaffoldError(f"{rel} does not parse ({exc.message} at line {exc.raw_line}); nothing written") from exc
    if getattr(command_cls, "NEEDS_SOURCE", False):
        kwargs["source"] = source
    context = CodemodContext(filename=rel)
    command = command_cls(context, **kwargs)
    # `Codemod.transform_module` first deep-copies the tree into a MetadataWrapper (0.3-0.6 s on
    # serving_speech.py). Our commands declare no metadata and the tree was parsed here, so run the
    # visitor directly, then the import pass that `CodemodCommand` would run (see docs/decisions.md).
    if command.METADATA_DEPENDENCIES:
        new_module = command.transform_module(module)
    else:
        new_module = command.transform_module_impl(module)
        if AddImportsVisitor.CONTEXT_KEY in context.scratch:
            new_module = AddImportsVisitor(context).transform_module(new_module)
    anchor_found = getattr(command, "anchor_found", True)
    if not anchor_found:
        raise ScaffoldError(f"{rel}: anchor {command.ANCHOR} not found; this tree's layout is not the one detected")
    return new_module.code


def literal(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal node, else None."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value if isinstance(node.evaluated_value, str) else None
    return None


def append_element(elements: list, new, opening_ws: cst.BaseParenthesizableWhitespace):
    """Append `new` to a bracketed sequence of Element/DictElement nodes, keeping the layout.

    The previous last element takes the comma that separates elements (with its newline and indent),
    and the new element takes over the last element's trailing comma, so the result reads as if the
    entry had always been there (ruff-format leaves it unchanged).
    """
    if not elements:
        raise ScaffoldError("internal error: appending to an empty literal is not supported")
    last = elements[-1]
    template = elements[-2].comma.whitespace_after if len(elements) >= 2 else opening_ws
    if isinstance(template, cst.ParenthesizedWhitespace):
        # Keep the newline and indent, drop comments that belong to the element after it.
        template = cst.ParenthesizedWhitespace(indent=template.indent, last_line=template.last_line)
    separator = cst.Comma(whitespace_after=template)
    trailing = last.comma if isinstance(last.comma, cst.Comma) else cst.MaybeSentinel.DEFAULT
    return [*elements[:-1], last.with_changes(comma=separator), new.with_changes(comma=trailing)]
