"""Where a model hook sees its batch: the per-request lists the runner passes (one dict per
scheduled request, in batch order) and the loops over them. Shared by the I4 and I5 rules."""

from __future__ import annotations

import ast
import re

from omnitts.validators.static.index import FUNC_TYPES, children, dotted

BATCH_HOOKS = frozenset({"forward", "make_omni_output"})
PER_REQUEST_PARAMS = frozenset(
    {
        "runtime_additional_information",
        "model_intermediate_buffer",
        "infos",
        "info_dicts",
        "request_infos",
        "runtime_info",
    }
)
_KW_KEYS = ("runtime_additional_information", "model_intermediate_buffer")
_SPLIT_CALL = re.compile(r"split|per_request")
_PENDING_ATTR = re.compile(r"pending|requests|infos")


def _is_per_request_source(node: ast.AST, lists: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in lists
    if isinstance(node, ast.BoolOp):
        return _is_per_request_source(node.values[0], lists)
    if isinstance(node, ast.IfExp):
        return _is_per_request_source(node.body, lists) or _is_per_request_source(node.orelse, lists)
    if isinstance(node, ast.Call):
        name = dotted(node.func)
        if (
            name.endswith(".get")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in _KW_KEYS
        ):
            return True
        if _SPLIT_CALL.search(name.split(".")[-1]):
            return True
        if name in ("list", "tuple") and node.args:
            return _is_per_request_source(node.args[0], lists)
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in _KW_KEYS:
        return True
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return bool(_PENDING_ATTR.search(node.attr))  # requests queued by preprocess() for this step
    return False


def per_request_lists(fn: ast.AST) -> set[str]:
    """Names bound to a per-request list in a function (flow-insensitive fixpoint): the runner's
    list and its aliases, per-request splits of the batch, requests queued by preprocess(), and
    lists filled one entry per request inside a loop over one of those."""
    args = fn.args
    lists = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a.arg in PER_REQUEST_PARAMS}
    nodes = list(_own_nodes(fn))
    assigns = [n for n in nodes if isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None]
    loops = [n for n in nodes if isinstance(n, ast.For)]
    changed = True
    while changed:
        changed = False
        for n in assigns:
            pairs = []
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Tuple) and isinstance(n.value, ast.Tuple) and len(t.elts) == len(n.value.elts):
                    pairs += list(zip(t.elts, n.value.elts, strict=False))
                else:
                    pairs.append((t, n.value))
            for t, v in pairs:
                if isinstance(t, ast.Name) and t.id not in lists and _is_per_request_source(v, lists):
                    lists.add(t.id)
                    changed = True
        counts = request_counts(fn, lists)
        for loop in loops:
            if not loop_binds_request(loop, lists, counts):
                continue
            body = list(_own_nodes(ast.Module(body=loop.body, type_ignores=[])))
            # Only lists created before the loop collect one entry per request; a list created in
            # the body belongs to one request.
            local = {
                t.id
                for n in body
                if isinstance(n, ast.Assign | ast.AnnAssign)
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Name)
            }
            for n in body:
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append":
                    owner = n.func.value
                    if isinstance(owner, ast.Name) and owner.id not in lists and owner.id not in local:
                        lists.add(owner.id)
                        changed = True
    return lists


def loop_binds_request(loop: ast.For, lists: set[str], counts: set[str]) -> bool:
    """A `for` over the per-request list (directly, enumerate/zip of it, or range(len(it)))."""
    it = loop.iter
    if isinstance(it, ast.Name | ast.BoolOp | ast.IfExp | ast.Subscript) and _is_per_request_source(it, lists):
        return True
    if isinstance(it, ast.Call):
        name = dotted(it.func)
        if name in ("enumerate", "zip", "reversed", "list"):
            return any(loop_binds_request(ast.For(ast.Name("_"), a, [], []), lists, counts) for a in it.args)
        if name == "range" and it.args:
            last = it.args[-1] if len(it.args) == 1 else it.args[1]
            if isinstance(last, ast.Call) and dotted(last.func) == "len" and last.args:
                return isinstance(last.args[0], ast.Name) and last.args[0].id in lists
            return isinstance(last, ast.Name) and last.id in counts
    return False


def request_counts(fn: ast.AST, lists: set[str]) -> set[str]:
    """Names holding len(per-request list): `num_reqs = len(infos)`."""
    out = set()
    for n in _own_nodes(fn):
        if (
            isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Call)
            and dotted(n.value.func) in ("len", "max", "min")
        ):
            inner = n.value.args
            if any(
                isinstance(a, ast.Call)
                and dotted(a.func) == "len"
                and a.args
                and isinstance(a.args[0], ast.Name)
                and a.args[0].id in lists
                for a in inner
            ) or (dotted(n.value.func) == "len" and inner and isinstance(inner[0], ast.Name) and inner[0].id in lists):
                out |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    return out


def per_request_loops(fn: ast.AST) -> list[ast.For]:
    lists = per_request_lists(fn)
    if not lists:
        return []
    counts = request_counts(fn, lists)
    return [n for n in _own_nodes(fn) if isinstance(n, ast.For) and loop_binds_request(n, lists, counts)]


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """Nodes of a function body, not descending into nested functions or classes (memoized on
    the node: the I4/I5 rules ask for the same hooks several times)."""
    cached = getattr(fn, "_omni_own", None)
    if cached is not None:
        return cached
    out = []
    stack = list(fn.body)
    skip = FUNC_TYPES + (ast.ClassDef, ast.Lambda)
    while stack:
        n = stack.pop()
        out.append(n)
        for c in children(n):
            if not isinstance(c, skip):
                stack.append(c)
    if not isinstance(fn, ast.Module):
        fn._omni_own = out
    return out


own_nodes = _own_nodes
