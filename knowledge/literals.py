"""The one literal evaluator for vLLM-Omni's Python-declared configuration: `PipelineConfig(...)` /
`StagePipelineConfig(...)` calls, `_OMNI_MODELS` / `_OMNI_PIPELINES` / `OMNI_PIPELINES` registries and
the module constants they use, read with `ast` (the tree is never imported: that needs vLLM and a GPU).

What it evaluates beyond `ast.literal_eval`: module constants by name (`model_arch=ARCH`), f-strings over
them, enum members by their name (`StageExecutionType.LLM_AR` -> "LLM_AR"). Anything else is not a
literal: it raises `NotLiteral`, or evaluates to the caller's `unknown` value where the caller reads
partially known configs (the static rules point at what they can read and skip the rest).

(`omnitts.scaffold.codemods.base.literal` is a different job: the string value of a libcst node that a
codemod is about to rewrite.)
"""

from __future__ import annotations

import ast
from typing import Any

_RAISE = object()


class NotLiteral(ValueError):
    """The node is not a literal omnitts can evaluate without running the tree's code."""


def dotted(node: ast.AST) -> str:
    """`a.b.c` for Name/Attribute chains, '' otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def evaluate(node: ast.AST, consts: dict[str, Any], unknown: Any = _RAISE) -> Any:
    """The value of ``node``; a sub-node that is not a literal raises `NotLiteral`, or becomes ``unknown``
    where one is given (so a list keeps its known elements)."""

    def fail():
        if unknown is _RAISE:
            raise NotLiteral(ast.dump(node))
        return unknown

    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                try:
                    parts.append(str(evaluate(v.value, consts)))
                except NotLiteral:
                    return fail()
            else:
                return fail()
        return "".join(parts)
    if isinstance(node, ast.Name):
        return consts[node.id] if node.id in consts else fail()
    if isinstance(node, ast.Attribute):  # StageExecutionType.LLM_AR -> "LLM_AR"
        return node.attr
    if isinstance(node, ast.Tuple):
        return tuple(evaluate(e, consts, unknown) for e in node.elts)
    if isinstance(node, ast.List):
        return [evaluate(e, consts, unknown) for e in node.elts]
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {
            evaluate(k, consts, unknown): evaluate(v, consts, unknown)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    try:
        return ast.literal_eval(node)
    except Exception:  # noqa: BLE001 - ast.literal_eval raises several types for "not a literal"
        return fail()


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """`NAME = <literal>` assignments of a module, in order (a later one may use an earlier one)."""
    consts: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = evaluate(node.value, consts)
            except NotLiteral:
                pass
    return consts


def call_kwargs(call: ast.Call, consts: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of a call, each evaluated; one that is not a literal stays its `ast` node."""
    out: dict[str, Any] = {}
    for k in call.keywords:
        if k.arg is None:
            continue
        try:
            out[k.arg] = evaluate(k.value, consts)
        except NotLiteral:
            out[k.arg] = k.value
    return out
