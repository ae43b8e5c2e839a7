"""Where model code sees its batch: the per-request collections the runner passes (one dict per
scheduled request, in batch order), what is derived from them, and the loops over them. Shared by
the I4 and I5 rules.

Facts come from the data, not from names:

- the batched runner hooks and the keywords that carry the per-request list are the knowledge
  layer's (``per_step_hooks``: ``forward(..., runtime_additional_information=...)``,
  ``preprocess_decode_batch(req_infos=...)``), read as parameters or as ``kwargs.get(KEY)``;
- derived lists: aliases, ``list()``/``sorted()``/``enumerate()``/``zip()`` of one, slices, a
  comprehension over one (one entry per request), ``torch.split`` by per-request sizes, lists filled
  with one entry per request inside a loop over one, what an in-file helper returns when it returns
  one, and attributes a per-request hook appends to (requests queued by ``preprocess`` for the step);
- in-file helpers a batched hook (or one of its helpers) passes such a list to see it as a parameter
  (``RequestFacts``: a fixpoint over the call graph, one pass per function and round).

A loop binds a request when it iterates such a list directly, through ``enumerate``/``zip``/
``reversed``, by index (``for i in range(len(xs))``, ``range(n)`` with ``n = len(xs)``), or as a
``while i < len(xs)`` loop; its request variables are its targets and ``x = xs[i]`` reads of the
current entry.
"""

from __future__ import annotations

import ast

from omnitts.validators.static.index import FUNC_TYPES, children, dotted, is_self_attr

_SIZE_SPLITS = frozenset({"split", "tensor_split"})
_ORDER_CALLS = frozenset({"list", "tuple", "sorted", "reversed", "enumerate", "zip", "iter"})


def request_keys(index) -> frozenset[str]:
    """The keywords under which the target's runner passes per-request lists (knowledge layer)."""
    return frozenset(k for h in index.hooks.values() for k in h.request_lists)


def batched_hooks(index) -> list:
    """Methods the runner calls once per step with the whole batch's per-request list."""
    out = []
    for fn in index.functions.values():
        hook = index.hook(fn)
        if hook is not None and hook.per == "batch" and hook.request_lists:
            out.append(fn)
    return out


class _Ctx:
    """What the per-function list inference may ask about the rest of the file."""

    def __init__(self, keys: frozenset[str], returns: set[str] | None = None, pending: set[str] | None = None):
        self.keys = keys
        self.returns = returns or set()  # qualnames of in-file functions that return a per-request list
        self.pending = pending or set()  # self attributes filled with one entry per request
        self.index = None
        self.fn = None


_DEFAULT_KEYS = frozenset({"runtime_additional_information", "model_intermediate_buffer", "req_infos"})


def _is_per_request_source(node: ast.AST, lists: set[str], ctx: _Ctx | None = None) -> bool:
    keys = ctx.keys if ctx is not None else _DEFAULT_KEYS
    if isinstance(node, ast.Name):
        return node.id in lists
    if isinstance(node, ast.BoolOp):
        return _is_per_request_source(node.values[0], lists, ctx)
    if isinstance(node, ast.IfExp):
        return _is_per_request_source(node.body, lists, ctx) or _is_per_request_source(node.orelse, lists, ctx)
    if isinstance(node, ast.ListComp | ast.GeneratorExp):
        it = node.generators[0].iter  # one entry per request: over the list, or over range(len(list))
        if isinstance(it, ast.Call) and dotted(it.func) == "range" and it.args:
            return _is_count(it.args[-1] if len(it.args) == 1 else it.args[1], lists, set())
        return _is_per_request_source(it, lists, ctx)
    if isinstance(node, ast.Call):
        name = dotted(node.func)
        last = name.split(".")[-1]
        if last in ("get", "pop") and node.args and isinstance(node.args[0], ast.Constant):
            return node.args[0].value in keys
        if last in _SIZE_SPLITS and len(node.args) + len(node.keywords) >= 1:
            sizes = node.args[-1] if node.args else node.keywords[-1].value
            # torch.split(x, sizes) / x.split(sizes): one chunk per entry of a size list (per request)
            return not (isinstance(sizes, ast.Constant) and isinstance(sizes.value, int))
        if name in _ORDER_CALLS and node.args:
            return any(_is_per_request_source(a, lists, ctx) for a in node.args)
        if ctx is not None and ctx.index is not None and ctx.fn is not None and ctx.returns:
            target = ctx.index.resolve(ctx.fn, node)
            return target is not None and target.qualname in ctx.returns
        return False
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Constant) and node.slice.value in keys:
            return True
        if isinstance(node.slice, ast.Slice):
            return _is_per_request_source(node.value, lists, ctx)  # xs[a:b]: still one entry per request
        return False
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return ctx is not None and node.attr in ctx.pending  # requests queued by preprocess() for this step
    return False


def per_request_lists(fn: ast.AST, seeds: set[str] | None = None, ctx: _Ctx | None = None) -> set[str]:
    """Names bound to a per-request list in a function (flow-insensitive fixpoint): the runner's list
    (a parameter named by the runner contract, or ``seeds``: parameters a caller passes one to) and its
    derivations (see the module docstring)."""
    keys = ctx.keys if ctx is not None else _DEFAULT_KEYS
    args = fn.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    lists = {p for p in params if p in keys} | (set(seeds or ()) & params)
    nodes = list(_own_nodes(fn))
    assigns = [n for n in nodes if isinstance(n, ast.Assign | ast.AnnAssign) and n.value is not None]
    loops = [n for n in nodes if isinstance(n, ast.For | ast.While)]
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
                if isinstance(t, ast.Name) and t.id not in lists and _is_per_request_source(v, lists, ctx):
                    lists.add(t.id)
                    changed = True
        counts = request_counts(fn, lists)
        for loop in loops:
            if not loop_binds_request(loop, lists, counts):
                continue
            body = list(_own_nodes(loop))
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


def loop_binds_request(loop: ast.AST, lists: set[str], counts: set[str]) -> bool:
    """A loop over the per-request list: `for` over it (directly, enumerate/zip of it, or by index),
    or `while i < len(xs)` / `while i < n` with `n = len(xs)`."""
    if isinstance(loop, ast.While):
        t = loop.test
        if isinstance(t, ast.Compare) and len(t.ops) == 1 and isinstance(t.ops[0], ast.Lt | ast.LtE):
            return _is_count(t.comparators[0], lists, counts)
        return False
    it = loop.iter
    if isinstance(it, ast.Name | ast.BoolOp | ast.IfExp | ast.Subscript) and _is_per_request_source(it, lists):
        return True
    if isinstance(it, ast.Call):
        name = dotted(it.func)
        if name in ("enumerate", "zip", "reversed", "list", "tuple", "sorted"):
            return any(loop_binds_request(ast.For(ast.Name("_"), a, [], []), lists, counts) for a in it.args)
        if name == "range" and it.args:
            last = it.args[-1] if len(it.args) == 1 else it.args[1]
            return _is_count(last, lists, counts)
    return False


def _is_count(node: ast.AST, lists: set[str], counts: set[str]) -> bool:
    if isinstance(node, ast.Call) and dotted(node.func) == "len" and node.args:
        return isinstance(node.args[0], ast.Name) and node.args[0].id in lists
    return isinstance(node, ast.Name) and node.id in counts


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


def loop_request_vars(loop: ast.AST, lists: set[str]) -> set[str]:
    """Names that hold the current request's entry inside a loop over the batch: the loop's targets, and
    names bound to `xs[i]` (xs a per-request list) in its body."""
    out: set[str] = set()
    if isinstance(loop, ast.For):
        out |= {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
    for n in _own_nodes(loop):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Subscript):
            base = n.value.value
            if isinstance(base, ast.Name) and base.id in lists and not isinstance(n.value.slice, ast.Slice):
                for t in n.targets:
                    out |= {x.id for x in ast.walk(t) if isinstance(x, ast.Name)}
    return out


def per_request_loops(fn: ast.AST, seeds: set[str] | None = None, ctx: _Ctx | None = None) -> list[ast.AST]:
    lists = per_request_lists(fn, seeds, ctx)
    if not lists:
        return []
    counts = request_counts(fn, lists)
    return [n for n in _own_nodes(fn) if isinstance(n, ast.For | ast.While) and loop_binds_request(n, lists, counts)]


class RequestFacts:
    """Per file: the per-request lists of every function a batched hook reaches (its own and the ones its
    callers pass in), the functions that return one, and the attributes per-request hooks queue requests
    in. Built once per file (cached on the source file)."""

    MAX_ROUNDS = 4

    def __init__(self, index) -> None:
        self.index = index
        self.ctx = _Ctx(request_keys(index) or _DEFAULT_KEYS)
        self.ctx.index = index
        self.ctx.pending = self._pending_attrs()
        self.hooks = batched_hooks(index)
        self.seeds: dict[str, set[str]] = {}
        self.lists: dict[str, set[str]] = {}
        self.reach: list = []
        if not self.hooks:
            return
        seen: set[str] = set()
        work = list(self.hooks)
        while work:  # every function a batched hook reaches (the call graph's own resolution)
            fn = work.pop()
            if fn.qualname in seen:
                continue
            seen.add(fn.qualname)
            self.reach.append(fn)
            work.extend(t for t, _l, guarded in index.callees(fn) if not guarded and t.qualname not in seen)
        # A function's lists depend only on its seeds and on which functions return a list (both only grow):
        # with neither changed since its last round, its lists, its return and its calls' bindings are what
        # they were, so the round skips it.
        inputs: dict[str, tuple[frozenset[str], int]] = {}
        for _ in range(self.MAX_ROUNDS):
            changed = False
            for fn in self.reach:
                key = (frozenset(self.seeds.get(fn.qualname, ())), len(self.ctx.returns))
                if inputs.get(fn.qualname) == key:
                    continue
                inputs[fn.qualname] = key
                self.ctx.fn = fn
                lists = per_request_lists(fn.node, self.seeds.get(fn.qualname), self.ctx)
                if lists != self.lists.get(fn.qualname):
                    self.lists[fn.qualname] = lists
                    changed = True
                if lists and fn.qualname not in self.ctx.returns and self._returns_list(fn, lists):
                    self.ctx.returns.add(fn.qualname)
                    changed = True
                if lists:
                    changed |= self._bind_calls(fn, lists)
            if not changed:
                break
        self.ctx.fn = None

    def _returns_list(self, fn, lists: set[str]) -> bool:
        return any(
            isinstance(n, ast.Return) and n.value is not None and _is_per_request_source(n.value, lists, self.ctx)
            for n in _own_nodes(fn.node)
        )

    def _bind_calls(self, fn, lists: set[str]) -> bool:
        from omnitts.validators.static.index import iter_stmts, stmt_exprs, walk
        from omnitts.validators.static.tensors import bind_args

        changed = False
        calls = [
            n
            for st, ctx in iter_stmts(fn.node.body)
            if not ctx.guarded  # a run-once branch (a first-request log line) does not hand the batch on
            for e in stmt_exprs(st)
            for n in walk(e)
            if isinstance(n, ast.Call)
        ]
        for n in calls:
            target = self.index.resolve(fn, n) or self.index.resolve_module_call(fn, n)
            if target is None or target is fn:
                continue
            for param, arg in bind_args(self.index, target, n):
                self.ctx.fn = fn
                if _is_per_request_source(arg, lists, self.ctx):
                    slot = self.seeds.setdefault(target.qualname, set())
                    if param not in slot:
                        slot.add(param)
                        changed = True
        return changed

    def _pending_attrs(self) -> set[str]:
        """Attributes a per-request hook (or a helper it calls) appends to: the step's queued requests."""
        out: set[str] = set()
        for fn in self.index.functions.values():
            hook = self.index.hook(fn)
            if hook is None or hook.per != "request":
                continue
            for f in _closure(self.index, fn):
                for n in _own_nodes(f.node):
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "append":
                        attr = is_self_attr(n.func.value)
                        if attr is not None:
                            out.add(attr)
        return out

    def of(self, fn) -> set[str]:
        return self.lists.get(fn.qualname, set())

    def any_function(self, fn) -> set[str]:
        """The per-request lists of any function: the fixpoint's for one a batched hook reaches, else its
        own (the runner's keywords, queued requests, derivations)."""
        if fn.qualname in self.lists:
            return self.lists[fn.qualname]
        self.ctx.fn = fn
        return per_request_lists(fn.node, None, self.ctx)

    def ctx_for(self, fn) -> _Ctx:
        self.ctx.fn = fn
        return self.ctx


def _closure(index, fn) -> list:
    seen, out, work = set(), [], [fn]
    while work:
        f = work.pop()
        if f.qualname in seen:
            continue
        seen.add(f.qualname)
        out.append(f)
        work.extend(t for t, _l, g in index.callees(f) if not g)
    return out


def request_facts(src) -> RequestFacts:
    cached = src.__dict__.get("_requests")
    if cached is None:
        cached = src.__dict__["_requests"] = RequestFacts(src.index)
    return cached


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """Nodes of a function's (or a loop's) body, not descending into nested functions or classes (memoized on
    the node: the I4/I5 rules and the request-data fixpoints ask for the same hooks and loops many times)."""
    cached = getattr(fn, "_omni_own", None)
    if cached is not None:
        return cached
    out = _own_walk(list(fn.body))
    if not isinstance(fn, ast.Module):
        fn._omni_own = out
    return out


def own_stmt_nodes(stmt: ast.stmt) -> list[ast.AST]:
    """The statement and its nodes, not descending into nested functions or classes; what lies under it is
    memoized on it (without itself, which would make a reference cycle)."""
    below = stmt.__dict__.get("_omni_own_below")
    if below is None:
        below = stmt._omni_own_below = _own_walk([c for c in children(stmt) if not isinstance(c, _OWN_SKIP)])
    return [stmt, *below]


_OWN_SKIP = FUNC_TYPES + (ast.ClassDef, ast.Lambda)


def _own_walk(stack: list[ast.AST]) -> list[ast.AST]:
    out = []
    skip = _OWN_SKIP
    while stack:
        n = stack.pop()
        out.append(n)
        for c in children(n):
            if not isinstance(c, skip):
                stack.append(c)
    return out


own_nodes = _own_nodes
