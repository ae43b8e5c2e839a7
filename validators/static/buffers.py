"""Buffer-view analysis the I5 rules share: persistent buffers of a model class (allocated once,
overwritten every step or CUDA-graph replay), which values alias them, and where a caller keeps such
a view past the step."""

from __future__ import annotations

import ast

from omnitts.validators.static.index import ClassInfo, dotted, is_self_attr, iter_stmts, walk

COPY_METHODS = {"clone", "cpu", "numpy", "tolist", "copy", "detach_copy", "to"}
VIEW_METHODS = {
    "view",
    "narrow",
    "reshape",
    "squeeze",
    "unsqueeze",
    "transpose",
    "permute",
    "flatten",
    "expand",
    "detach",
    "contiguous",
    "select",
    "as_strided",
    "view_as",
    "t",
    "unflatten",
    "split",
    "chunk",
    "unbind",
}
BUFFER_FACTORIES = {"zeros", "empty", "ones", "full", "zeros_like", "empty_like", "ones_like", "full_like"}


# --- persistent buffers -------------------------------------------------------------------------
def persistent_buffers(cls: ClassInfo) -> set[str]:
    out = set()
    for attr, values in cls.attr_values.items():
        for v in values:
            if isinstance(v, ast.Call):
                name = dotted(v.func)
                if name == "self.register_buffer" or (
                    name.startswith("torch.") and name.split(".")[-1] in BUFFER_FACTORIES
                ):
                    out.add(attr)
    return out


def buffer_view_of(node: ast.AST, buffers: set[str], views: set[str]) -> str | None:
    """The buffer a value aliases, if it is the buffer or a view of it."""
    while True:
        if (a := is_self_attr(node)) is not None:
            return a if a in buffers else None
        if isinstance(node, ast.Name):
            return node.id if node.id in views else None
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "data"):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in VIEW_METHODS:
            node = node.func.value
        else:
            return None


def strip_views(e: ast.AST) -> ast.AST:
    while isinstance(e, ast.Subscript) or (
        isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in VIEW_METHODS
    ):
        e = e.value if isinstance(e, ast.Subscript) else e.func.value
    return e


def kept_past_step(fn: ast.AST, call: ast.Call) -> int | None:
    """Line where a caller stores a view of a call's result beyond the step: on an object's
    attribute (`state.last_codes = codes[i]`) or into an emitted list (`frames.append(codes[i])`)."""
    names: set[str] = set()
    after = None
    for stmt, _ctx in iter_stmts(fn.body):
        if after is None:
            if isinstance(stmt, ast.Assign) and stmt.value is call:
                for t in stmt.targets:
                    names |= {x.id for x in walk(t) if isinstance(x, ast.Name)}
                after = stmt.lineno
            continue
        if isinstance(stmt, ast.Assign):
            value_base = strip_views(stmt.value)
            is_view = isinstance(value_base, ast.Name) and value_base.id in names
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    if is_view:
                        names.add(t.id)
                    else:
                        names.discard(t.id)  # rebound (e.g. to a copy)
                elif isinstance(t, ast.Attribute) and is_view:
                    return stmt.lineno
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
        ):
            c = stmt.value
            if c.func.attr in ("append", "extend", "insert") and c.args:
                base = strip_views(c.args[-1])
                if isinstance(base, ast.Name) and base.id in names:
                    return stmt.lineno
    return None


def dict_values(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.Dict):
        return [e for v in node.values for e in elements(v)]
    return []


def elements(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.List | ast.Tuple):
        return list(node.elts)
    return [node]
