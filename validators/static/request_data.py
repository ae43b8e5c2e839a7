"""Where one request's data ends up in a plain attribute of the model (I5): per-request values followed
from where the runner hands them over, through assignments and in-file helpers, to `self.x = ...`.

Per-request data is:

- inside a per-request loop of a function that holds the batch's per-request list (`batch.RequestFacts`:
  the runner's list, its derivations, and helpers it is passed to), the loop's request variables;
- in a per-request hook (the knowledge layer's ``per_step_hooks`` with ``request_dict``: `preprocess`,
  `postprocess`), the keywords the runner unpacks from the request's dict (`**info`, keyword parameters);
- whatever is computed from those (assignments, loops over them, calls with them as arguments) and the
  parameters of in-file helpers that receive them.

A write is kept state, and reported, when the attribute is read again where another request's value can
be there: in a method the writing hook does not itself call, or in the writing function before the write
(the next step, or the next request's iteration) or after the loop. Reads only by helpers the hook calls
(passing context down the same request's iteration) are not.
"""

from __future__ import annotations

import ast

from omnitts.validators.static.batch import (
    loop_binds_request,
    loop_request_vars,
    own_nodes,
    own_stmt_nodes,
    request_counts,
    request_facts,
)
from omnitts.validators.static.index import FUNC_TYPES, dotted, is_self_attr, iter_stmts, walk
from omnitts.validators.static.request_state import is_flagish

_META = frozenset({"device", "dtype"})
MAX_DEPTH = 3


def _mentions(expr: ast.AST, tainted: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in tainted for n in walk(expr))


def _metadata(value: ast.AST) -> bool:
    """A device/dtype (the same for the whole batch), or None."""
    parts = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    if isinstance(value, ast.BoolOp):
        parts = list(value.values)
    return all(
        (isinstance(p, ast.Attribute) and p.attr in _META) or (isinstance(p, ast.Constant) and p.value is None)
        for p in parts
    )


def _propagate(names: set[str], body: list[ast.stmt]) -> set[str]:
    """Names computed from per-request data in these statements (flow-insensitive)."""
    tainted = set(names)
    nodes = [n for s in body for n in ([s] if isinstance(s, FUNC_TYPES) else own_stmt_nodes(s))]
    assigns = [n for n in nodes if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.For)]
    changed = True
    while changed:
        changed = False
        for n in assigns:
            value = n.iter if isinstance(n, ast.For) else n.value
            if value is None or not _mentions(value, tainted) or _metadata(value):
                continue
            targets = [n.target] if not isinstance(n, ast.Assign) else n.targets
            for t in targets:
                for x in ast.walk(t):
                    if isinstance(x, ast.Name) and x.id not in tainted:
                        tainted.add(x.id)
                        changed = True
    return tainted


def _request_dict_params(fn) -> set[str]:
    """The keywords a per-request hook receives from the request's dict: `**info` and keyword parameters."""
    args = fn.node.args
    out = {a.arg for a in args.kwonlyargs}
    if args.kwarg is not None:
        out.add(args.kwarg.arg)
    positional = [*args.posonlyargs, *args.args]
    # parameters with defaults after the runner's positional tensors are filled from the dict's keys too
    with_default = positional[len(positional) - len(args.defaults) :] if args.defaults else []
    out |= {a.arg for a in with_default}
    return out


def _closure(index, fn) -> set[str]:
    seen, work = set(), [fn]
    while work:
        f = work.pop()
        if f.qualname in seen:
            continue
        seen.add(f.qualname)
        work.extend(t for t, _l, _g in index.callees(f))
    return seen


def _loads(fn, attr: str) -> list[ast.Attribute]:
    return [
        n
        for n in own_nodes(fn.node)
        if isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Load)
        and n.attr == attr
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
    ]


def _kept(index, fn, root, stmt: ast.stmt, attr: str, region: ast.AST | None, transient: set[str]) -> bool:
    """Whether another request's value can be read from the attribute (see the module docstring)."""
    for other in index.functions.values():
        loads = _loads(other, attr)
        if not loads:
            continue
        if other is fn or other is root:
            for n in loads:
                if n.lineno < stmt.lineno:
                    return True  # read before the write: the previous request's (or step's) value
                if region is not None and other is fn and n.lineno > (region.end_lineno or region.lineno):
                    return True  # read after the per-request loop: the last request's value
            continue
        if other.qualname in transient:
            continue  # a helper the hook itself calls: the same request's iteration
        return True
    return False


def per_request_writes(src) -> list[tuple]:
    """(function, statement, attribute, in a per-request loop) for every kept per-request write."""
    cached = src.__dict__.get("_i5_writes")
    if cached is not None:
        return cached
    index = src.index
    facts = request_facts(src)
    todo: list[tuple] = []  # (fn, names, root, in_loop, depth, region)
    for fn in index.functions.values():
        hook = index.hook(fn)
        if hook is not None and hook.per == "request" and hook.request_dict:
            params = _request_dict_params(fn)
            if params:
                todo.append((fn, params, fn, False, 0, None))
    for fn in facts.reach:
        lists = facts.of(fn)
        if not lists:
            continue
        counts = request_counts(fn.node, lists)
        for loop in own_nodes(fn.node):
            if isinstance(loop, ast.For | ast.While) and loop_binds_request(loop, lists, counts):
                todo.append((fn, loop_request_vars(loop, lists), fn, True, 0, loop))
    out: dict[int, tuple] = {}
    seen: set = set()
    transient_of: dict[str, set[str]] = {}
    while todo:
        fn, names, root, in_loop, depth, region = todo.pop()
        key = (fn.qualname, frozenset(names), root.qualname, in_loop, id(region))
        if key in seen or depth > MAX_DEPTH or not names:
            continue
        seen.add(key)
        body = region.body if region is not None else fn.node.body
        tainted = _propagate(names, body)
        if root.qualname not in transient_of:
            transient_of[root.qualname] = _closure(index, root)
        for stmt, ctx in iter_stmts(body):
            if isinstance(stmt, FUNC_TYPES) or ctx.guarded:
                continue
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                attr = is_self_attr(stmt.targets[0])
                v = stmt.value
                if (
                    attr is not None
                    and _mentions(v, tainted)
                    and not _metadata(v)
                    and not (in_loop and is_flagish(v))  # a batch-wide flag is OMNI-I4-004's
                    and id(stmt) not in out
                    and _kept(index, fn, root, stmt, attr, region, transient_of[root.qualname])
                ):
                    out[id(stmt)] = (fn, stmt, attr, in_loop)
        from omnitts.validators.static.tensors import bind_args

        for n in (x for s in body for x in own_stmt_nodes(s) if not isinstance(s, FUNC_TYPES)):
            if not isinstance(n, ast.Call) or not _mentions(n, tainted):
                continue
            target = index.resolve(fn, n)
            if target is None or target is fn or dotted(n.func) in ("len", "isinstance"):
                continue
            params = {p for p, a in bind_args(index, target, n) if _mentions(a, tainted)}
            if params:
                todo.append((target, params, root, in_loop, depth + 1, None))
    result = sorted(out.values(), key=lambda r: r[1].lineno)
    src.__dict__["_i5_writes"] = result
    return result
