"""Per-module index shared by the model rules: classes, functions, in-file call graph, and which
code runs per step (hot) — built once per file, only for files a model rule looks at.

Hotness: a *per-step* function is a method the target release's runner calls on every step (the
knowledge layer's ``per_step_hooks``: ``forward``, ``compute_logits``, ``talker_mtp``, ...) or anything
it calls, in this file; every loop in a per-step function is a hot loop (per-request loops, AR
decode, solver and vocoder loops); a function called from a hot loop is hot in its whole body.
Calls under a run-once guard (``if self._x is None:``, ``if key not in self._cache:``, CUDA-graph
capture, debug-only branches) do not propagate. A generator function is per-step wherever it is
created, because its body runs on each ``next()``.
"""

from __future__ import annotations

import ast
import re
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain

from omnitts.knowledge.runner import HOOK_REGISTRARS, StepHook, per_step_hooks

_CALLED = re.compile(r"(\w+)\s*\(")
_PLAIN_CALL = re.compile(r"(?<![.\w])(\w+)\s*\(")
_SELF_CALL = re.compile(r"\bself\.(\w+)\s*\(")
_SELF_ATTR_CALL = re.compile(r"\bself\.(\w+)\.(\w+)\s*\(")
FUNC_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)
_DEBUG_NAME = re.compile(r"debug|verbose|profil|trace|isEnabledFor|_log_|logging", re.I)
_CACHE_DECORATORS = {"cache", "lru_cache", "cached_property", "functools.cache", "functools.lru_cache"}


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


def is_self_attr(node: ast.AST) -> str | None:
    """Name of ``self.X`` (only the first level), else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _guard_atom(test: ast.AST) -> bool:
    # self._x is None / not self._x / not hasattr(self, ...) / key not in self._cache / self._done is False
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, left, right = test.ops[0], test.left, test.comparators[0]
        if isinstance(op, ast.Is) and isinstance(right, ast.Constant) and right.value in (None, False):
            return bool(dotted(left).startswith("self.")) or isinstance(left, ast.Name)
        if isinstance(op, ast.NotIn) and dotted(right).startswith("self."):
            return True
        if isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and right.value in (None, False, 0):
            return dotted(left).startswith("self.")
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = test.operand
        if dotted(inner).startswith("self."):
            return True
        if isinstance(inner, ast.Call) and dotted(inner.func) in ("hasattr", "getattr"):
            return bool(inner.args) and isinstance(inner.args[0], ast.Name) and inner.args[0].id == "self"
    return False


def is_run_once_test(test: ast.AST) -> bool:
    """True for a branch taken once (lazy init, first sight of a key) or only when debugging.
    Cached on the node: the index and every flow walker ask about the same branches."""
    cached = getattr(test, "_omni_once", None)
    if cached is None:
        cached = _run_once(test)
        test._omni_once = cached
    return cached


def _sampled(test: ast.AST) -> bool:
    """`step % 50 == 0`: a branch taken every N-th step (sampled logging/stats), not per step."""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.BinOp)
        and isinstance(test.left.op, ast.Mod)
        and any(isinstance(c, ast.Constant) and c.value == 0 for c in test.comparators)
    )


def _run_once(test: ast.AST) -> bool:
    if _guard_atom(test) or _sampled(test):
        return True
    if isinstance(test, ast.Attribute) and test.attr == "training" and dotted(test) == "self.training":
        return True  # training-only (dropout, codebook refresh): a served model is in eval mode
    if isinstance(test, ast.BoolOp):
        return any(is_run_once_test(v) for v in test.values)  # `a and self._x is None`: still once
    for n in walk(test):
        t = type(n)
        if (t is ast.Name and _DEBUG_NAME.search(n.id)) or (t is ast.Attribute and _DEBUG_NAME.search(n.attr)):
            return True
    return False


def is_graph_capture(with_node: ast.With) -> bool:
    return any(
        "graph" in dotted(item.context_expr.func if isinstance(item.context_expr, ast.Call) else item.context_expr)
        for item in with_node.items
    )


@dataclass
class FuncInfo:
    node: ast.FunctionDef | ast.AsyncFunctionDef
    qualname: str
    cls: str | None
    _calls: list[tuple[ast.Call, bool, bool]] | None = None  # (call, in_loop, guarded), built lazily
    _generator: bool | None = None
    _text: str | None = None
    # The ModuleIndex whose textual prefilter says whether an in-file call can be named (a weak reference:
    # a strong one would make every index a reference cycle, garbage only the cycle collector frees).
    index_ref: weakref.ref | None = None
    stmt_calls: dict | None = None  # id(statement) -> calls it makes (for walkers that skip cold code)
    _callees: list | None = None  # ModuleIndex.callees, memoised

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def text(self) -> str | None:
        """Source lines of the function (None when the index has no source); joined on first use."""
        if self._text is None:
            index = self.index_ref() if self.index_ref is not None else None
            if index is None or index._lines is None:
                return None
            self._text = "\n".join(index._lines[self.node.lineno - 1 : self.node.end_lineno])
        return self._text

    def _scan(self) -> None:
        index = self.index_ref() if self.index_ref is not None else None
        if index is not None and self.text is not None and not index._may_call_in_file(self):
            # No in-file callee is named in the body: only the generator flag is needed.
            self._calls = []
            self._generator = "yield" in (self.text or "")
            self.stmt_calls = {}
            return
        self._calls, self._generator, self.stmt_calls = _scan_calls(self.node.body, index)

    @property
    def calls(self) -> list[tuple[ast.Call, bool, bool]]:
        if self._calls is None:
            self._scan()
        return self._calls

    @property
    def is_generator(self) -> bool:
        if self._generator is None:
            self._scan()
        return self._generator


_COMP_TYPES = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_SIMPLE_STMTS = (
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Expr,
    ast.Return,
    ast.Raise,
    ast.Assert,
    ast.Delete,
)


def _scan_calls(body: list[ast.stmt], index: ModuleIndex | None):
    """The calls of a function body that a query of the index can resolve (in-file functions and
    classes, `self`/`cls`/`super()` methods, methods of `self.<attr>`, imported names), in the order
    `walk_expr` visits them, with (in a loop or comprehension, under a run-once guard); whether the
    body yields; and the resolvable calls of each statement.

    The hot path of the index (every per-step function is scanned), so: one inline walk, no
    generators; a simple statement whose source has neither `(` nor `yield` holds no call and no
    yield and is not walked; calls nothing can resolve (`torch.cat(...)`, `x.view(...)`) are dropped
    (every reader of `calls` resolves them first)."""
    calls: list[tuple[ast.Call, bool, bool]] = []
    stmt_calls: dict[int, list[ast.Call]] = {}
    gen = False
    lines = index._lines if index is not None else None
    names = index.call_names if index is not None else None
    classes = index.classes if index is not None else None
    Call, Name, Lambda, DictComp = ast.Call, ast.Name, ast.Lambda, ast.DictComp
    Yield, YieldFrom = ast.Yield, ast.YieldFrom
    fields_of = _FIELDS
    for stmt, ctx in iter_stmts(body):
        if lines is not None and isinstance(stmt, _SIMPLE_STMTS):
            first, last = stmt.lineno - 1, stmt.end_lineno
            if last - first == 1:
                text = lines[first]
                if "(" not in text and "yield" not in text:
                    continue
            else:
                span = lines[first:last]
                if not any("(" in t or "yield" in t for t in span):
                    continue
        in_loop = ctx.loops > 0
        guarded = ctx.guarded
        mine = None
        for root in stmt_exprs(stmt):
            stack = [(root, False)]
            pop, push = stack.pop, stack.append
            while stack:
                n, loop = pop()
                t = type(n)
                if t is Call:
                    if names is None or _resolvable(n.func, names, classes):
                        calls.append((n, in_loop or loop, guarded))
                        if mine is None:
                            mine = stmt_calls[id(stmt)] = []
                        mine.append(n)
                elif t is Name:
                    continue
                elif t is Lambda:
                    continue
                elif t is Yield or t is YieldFrom:
                    gen = True
                elif t in _COMP_TYPES:
                    gens = n.generators
                    push((gens[0].iter, loop))
                    for g in gens[1:]:
                        push((g.iter, True))
                    for g in gens:
                        push((g.target, True))
                        for c in g.ifs:
                            push((c, True))
                    if t is DictComp:
                        push((n.key, True))
                        push((n.value, True))
                    else:
                        push((n.elt, True))
                    continue
                fields = fields_of.get(t)
                if fields is None:
                    children(n)  # fills the field table for this type
                    fields = fields_of[t]
                for f in fields:
                    v = getattr(n, f, None)
                    if v is None:
                        continue
                    if type(v) is list:
                        for x in v:
                            if isinstance(x, ast.AST):
                                push((x, loop))
                    elif isinstance(v, ast.AST):
                        push((v, loop))
    return calls, gen, stmt_calls


def _resolvable(func: ast.AST, names: set[str], classes: dict) -> bool:
    """Whether ModuleIndex.resolve, resolve_module_call or outgoing can give a call of ``func`` a target."""
    t = type(func)
    if t is ast.Name:
        return func.id in names
    if t is ast.Attribute:
        base = func.value
        bt = type(base)
        if bt is ast.Name:
            return base.id in ("self", "cls") or base.id in classes
        if bt is ast.Attribute:
            return type(base.value) is ast.Name and base.value.id == "self"
        if bt is ast.Call:
            return dotted(base.func) == "super"
    return False


@dataclass
class ClassInfo:
    node: ast.ClassDef
    name: str
    bases: list[str]
    methods: dict[str, FuncInfo] = field(default_factory=dict)
    _attrs: tuple[dict[str, str], dict[str, list[ast.AST]]] | None = None

    def _scan_attrs(self) -> tuple[dict[str, str], dict[str, list[ast.AST]]]:
        """self.x = Foo(...) in __init__ -> attr_class; every value assigned to self.x -> attr_values."""
        attr_class: dict[str, str] = {}
        values: dict[str, list[ast.AST]] = {}
        for fn in self.methods.values():
            for n, _ctx in iter_stmts(fn.node.body):  # assignments are statements: no expression walk
                t = type(n)
                if t is ast.Assign or t is ast.AnnAssign or t is ast.AugAssign:
                    value = n.value
                    for tgt in n.targets if t is ast.Assign else [n.target]:
                        if type(tgt) is ast.Tuple:
                            for e in tgt.elts:
                                a = is_self_attr(e)
                                if a is not None:
                                    values.setdefault(a, []).append(ast.Name("__unknown__", ast.Load()))
                            continue
                        attr = is_self_attr(tgt)
                        if attr is None:
                            continue
                        if value is not None:
                            values.setdefault(attr, []).append(value)
                        if type(value) is ast.Call and fn.name == "__init__":
                            cname = dotted(value.func).split(".")[-1]
                            if cname[:1].isupper():
                                attr_class.setdefault(attr, cname)
                elif (
                    t is ast.Expr
                    and type(n.value) is ast.Call
                    and n.value.args
                    and dotted(n.value.func) == "self.register_buffer"
                ):
                    first = n.value.args[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str):
                        values.setdefault(first.value, []).append(n.value)
        return attr_class, values

    @property
    def attr_class(self) -> dict[str, str]:
        if self._attrs is None:
            self._attrs = self._scan_attrs()
        return self._attrs[0]

    @property
    def attr_values(self) -> dict[str, list[ast.AST]]:
        if self._attrs is None:
            self._attrs = self._scan_attrs()
        return self._attrs[1]


_FIELDS: dict[type, tuple[str, ...]] = {}
# The same fields, each with whether it is a list that may hold non-nodes (see _MIXED_LIST_FIELDS).
_FIELD_KINDS: dict[type, tuple[tuple[str, bool], ...]] = {}
# Fields that only hold context/operator singletons (Load, Store, Add, Eq, ...) or plain values.
_NO_CHILD_FIELDS = {
    "ctx",
    "op",
    "ops",
    "id",
    "attr",
    "value_kind",
    "kind",
    "type_comment",
    "name",
    "asname",
    "module",
    "level",
    "is_async",
    "conversion",
    "lineno",
    "col_offset",
}
# List fields that may hold something other than nodes (None, names as strings); every other list field
# holds nodes only and is copied without a test per element.
_MIXED_LIST_FIELDS = {"keys", "kw_defaults", "names", "kwd_attrs"}


def children(n: ast.AST) -> list[ast.AST]:
    """ast.iter_child_nodes without the generator overhead and without the Load/Store/operator
    singletons every expression carries (hot path of every walk)."""
    t = type(n)
    fields = _FIELD_KINDS.get(t)
    if fields is None:
        skip = set(_NO_CHILD_FIELDS)
        if t is ast.Constant:
            skip.add("value")
        _FIELDS[t] = tuple(f for f in t._fields if f not in skip)
        fields = _FIELD_KINDS[t] = tuple((f, f in _MIXED_LIST_FIELDS) for f in _FIELDS[t])
    out = []
    for f, mixed in fields:
        v = getattr(n, f, None)
        if v is None:
            continue
        if type(v) is list:
            if mixed:
                out.extend([x for x in v if isinstance(x, ast.AST)])
            else:
                out += v
        elif isinstance(v, ast.AST):
            out.append(v)
    return out


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk, faster (no generator per node); order is depth-first, not breadth-first. The rules walk the
    same statements and expressions several times each (every analysis reads the calls, names and attributes
    of every function), so a node's descendants are listed once and kept on it."""
    return chain((node,), descendants(node))


def descendants(node: ast.AST) -> list[ast.AST]:
    """Every node under ``node`` (not itself: a list holding its owner would be a reference cycle), in
    walk's order; memoized on the node, so it must not be mutated by the caller."""
    out = node.__dict__.get("_omni_desc")
    if out is None:
        out = []
        stack = children(node)
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(children(n))
        node._omni_desc = out
    return out


def walk_expr(node: ast.AST, in_loop: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node of an expression with whether it runs once per element of a comprehension.
    Lambda bodies are skipped (they run when called, elsewhere)."""
    stack = [(node, in_loop)]
    while stack:
        n, loop = stack.pop()
        yield n, loop
        t = type(n)
        if t is ast.Lambda:
            continue
        if t is ast.ListComp or t is ast.SetComp or t is ast.GeneratorExp or t is ast.DictComp:
            gens = n.generators
            stack.append((gens[0].iter, loop))
            for g in gens[1:]:
                stack.append((g.iter, True))
            for g in gens:
                stack.append((g.target, True))
                stack.extend((c, True) for c in g.ifs)
            elts = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]
            stack.extend((e, True) for e in elts)
            continue
        stack.extend((c, loop) for c in children(n))


def stmt_exprs(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions a statement evaluates itself (not those of nested statement bodies)."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.iter, stmt.target]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.context_expr for i in stmt.items] + [i.optional_vars for i in stmt.items if i.optional_vars]
    if isinstance(stmt, (ast.Try,)) or isinstance(stmt, FUNC_TYPES + (ast.ClassDef,)):
        return []
    if hasattr(ast, "TryStar") and isinstance(stmt, ast.TryStar):
        return []
    if isinstance(stmt, ast.Match):
        return [stmt.subject]
    return [stmt]


def child_blocks(stmt: ast.stmt) -> list[tuple[list[ast.stmt], str]]:
    """Nested statement lists with a role: body/orelse/loop/handler/finally."""
    if isinstance(stmt, LOOP_TYPES):
        return [(stmt.body, "loop"), (stmt.orelse, "orelse")]
    if isinstance(stmt, ast.If):
        return [(stmt.body, "then"), (stmt.orelse, "else")]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [(stmt.body, "with")]
    if isinstance(stmt, ast.Try) or (hasattr(ast, "TryStar") and isinstance(stmt, ast.TryStar)):
        out = [(stmt.body, "try")]
        out += [(h.body, "handler") for h in stmt.handlers]
        return out + [(stmt.orelse, "orelse"), (stmt.finalbody, "finally")]
    if isinstance(stmt, ast.Match):
        return [(c.body, "case") for c in stmt.cases]
    return []


@dataclass
class Ctx:
    loops: int = 0  # enclosing loops within this function
    guarded: bool = False  # under a run-once / debug-only guard
    error_path: bool = False  # except handler, raise


_DEFS = FUNC_TYPES + (ast.ClassDef,)
# Statements without nested statement lists.
_LEAF_STMTS = frozenset(
    {
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.Expr,
        ast.Return,
        ast.Raise,
        ast.Assert,
        ast.Delete,
        ast.Pass,
        ast.Break,
        ast.Continue,
        ast.Import,
        ast.ImportFrom,
        ast.Global,
        ast.Nonlocal,
    }
)


def iter_stmts(body: list[ast.stmt], ctx: Ctx | None = None) -> Iterator[tuple[ast.stmt, Ctx]]:
    """Statements of a function body (not nested defs) with their loop/guard context, in source order
    (a statement, then the blocks nested in it). One generator with a stack of block iterators: a
    recursive `yield from` pays for every level on every statement."""
    stack = [(iter(body), ctx or Ctx())]
    while stack:
        it, ctx = stack[-1]
        for stmt in it:
            yield stmt, ctx
            if type(stmt) in _LEAF_STMTS or isinstance(stmt, _DEFS):
                continue
            blocks = child_blocks(stmt)
            if not blocks:
                continue
            if type(stmt) is ast.If and not ctx.guarded and _done_guard(stmt):
                # `if self._initialized: return`: what follows in this block runs once (lazy initialisation)
                stack[-1] = (it, Ctx(ctx.loops, True, ctx.error_path))
            subs = []
            for block, role in blocks:
                sub = ctx
                if role == "loop":
                    sub = Ctx(ctx.loops + 1, ctx.guarded, ctx.error_path)
                elif role == "then" and is_run_once_test(stmt.test):
                    sub = Ctx(ctx.loops, True, ctx.error_path)
                elif role == "with" and is_graph_capture(stmt):
                    sub = Ctx(ctx.loops, True, ctx.error_path)
                elif role == "handler":
                    sub = Ctx(ctx.loops, ctx.guarded, True)
                subs.append((iter(block), sub))
            stack.extend(reversed(subs))
            break
        else:
            stack.pop()


def _done_guard(stmt: ast.If) -> bool:
    """`if self._inited: return` (a model attribute's truth, an immediate return, no else)."""
    t = stmt.test
    return (
        not stmt.orelse
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], ast.Return)
        and isinstance(t, ast.Attribute)
        and dotted(t).startswith("self.")
    )


def _cached(fn: ast.AST) -> bool:
    return any(dotted(d.func if isinstance(d, ast.Call) else d) in _CACHE_DECORATORS for d in fn.decorator_list)


class ModuleIndex:
    def __init__(
        self,
        tree: ast.Module,
        lines: list[str] | None = None,
        extra_entries: frozenset[tuple[str, str, bool]] = frozenset(),
        release: str | None = None,
    ) -> None:
        self.tree = tree
        self._lines = lines
        # The methods the target release's runner calls every step (every release's when none is known).
        self.hooks: dict[str, StepHook] = per_step_hooks(release)
        self._registered: dict[str, str] | None = None
        # (class or "", function, hot): functions another file of the package calls per step.
        self.extra_entries = extra_entries
        self.classes: dict[str, ClassInfo] = {}
        self.functions: dict[str, FuncInfo] = {}  # qualname -> info (module functions and methods)
        self.module_funcs: dict[str, FuncInfo] = {}
        self._spans: list[tuple[int, int, str]] = []
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self._add_class(node, node.name)
            elif isinstance(node, FUNC_TYPES):
                info = self._add_func(node, node.name, None)
                self.module_funcs[node.name] = info
        self._hot: tuple[set[str], set[str]] | None = None
        if lines is not None:
            self._plain_names = set(self.module_funcs) | set(self.classes) | {f.name for f in self.functions.values()}
            # Plain names a call can resolve through: in-file functions and classes, imported names.
            self.call_names = self._plain_names | set(self.imports())
            ref = weakref.ref(self)
            for f in self.functions.values():
                f.index_ref = ref

    def _may_call_in_file(self, fn: FuncInfo) -> bool:
        """Cheap textual test: can any call in this function resolve to a function of this file?
        (Skips the expression walk for the many layer forwards that only call torch.)"""
        text = fn.text or ""
        if "super()" in text or not self._plain_names.isdisjoint(_PLAIN_CALL.findall(text)):
            return True
        if fn.cls is None:
            return False
        own = set()
        cls: str | None = fn.cls
        seen = set()
        while cls and cls not in seen and cls in self.classes:
            seen.add(cls)
            own |= set(self.classes[cls].methods)
            cls = next((b for b in self.classes[cls].bases if b in self.classes), None)
        for name in _SELF_CALL.findall(text):
            if name in own or self.attr_class(fn.cls, name) in self.classes:
                return True
        for attr, _meth in _SELF_ATTR_CALL.findall(text):
            if self.attr_class(fn.cls, attr) in self.classes:
                return True
        return False

    # --- construction -------------------------------------------------------------------------
    def _add_class(self, node: ast.ClassDef, qual: str) -> None:
        info = ClassInfo(node, node.name, [dotted(b).split(".")[-1] for b in node.bases])
        self.classes.setdefault(node.name, info)
        self._spans.append((node.lineno, node.end_lineno or node.lineno, qual))
        for item in node.body:
            if isinstance(item, FUNC_TYPES):
                info.methods[item.name] = self._add_func(item, f"{qual}.{item.name}", node.name)
            elif isinstance(item, ast.ClassDef):
                self._add_class(item, f"{qual}.{item.name}")

    def _add_func(self, node, qual: str, cls: str | None) -> FuncInfo:
        info = FuncInfo(node, qual, cls)
        self.functions[qual] = info
        self._spans.append((node.lineno, node.end_lineno or node.lineno, qual))
        # Nested defs (closures) sit directly in statement bodies; lambdas are not functions here.
        if self._lines is not None and "def " not in "\n".join(self._lines[node.lineno : node.end_lineno]):
            return info
        for stmt, _ctx in iter_stmts(node.body):
            if isinstance(stmt, FUNC_TYPES):
                self._add_func(stmt, f"{qual}.{stmt.name}", cls)
        return info

    # --- queries ------------------------------------------------------------------------------
    @property
    def per_step(self) -> set[str]:
        if self._hot is None:
            self._hot = self._hotness()
        return self._hot[0]

    @property
    def hot(self) -> set[str]:
        if self._hot is None:
            self._hot = self._hotness()
        return self._hot[1]

    def method(self, cls: str | None, name: str) -> FuncInfo | None:
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            info = self.classes.get(cls)
            if info is None:
                return None
            if name in info.methods:
                return info.methods[name]
            cls = next((b for b in info.bases if b in self.classes), None)
        return None

    def attr_class(self, cls: str | None, attr: str) -> str | None:
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            info = self.classes.get(cls)
            if info is None:
                return None
            if attr in info.attr_class:
                return info.attr_class[attr]
            cls = next((b for b in info.bases if b in self.classes), None)
        return None

    def resolve(self, fn: FuncInfo, call: ast.Call) -> FuncInfo | None:
        """The in-file function a call reaches, if it can be told statically."""
        func = call.func
        if isinstance(func, ast.Name):
            if func.id in self.module_funcs:
                return self.module_funcs[func.id]
            if func.id in self.classes:
                return self.method(func.id, "__init__")
            return self.functions.get(f"{fn.qualname}.{func.id}")
        if not isinstance(func, ast.Attribute):
            return None
        base = func.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls"):
            return self.method(fn.cls, func.attr)
        attr = is_self_attr(base)
        if attr is not None:  # self.sub.method(...)
            return self.method(self.attr_class(fn.cls, attr), func.attr)
        if isinstance(base, ast.Call) and dotted(base.func) == "super" and fn.cls:
            info = self.classes.get(fn.cls)
            for b in info.bases if info else []:
                found = self.method(b, func.attr)
                if found:
                    return found
        if isinstance(base, ast.Name) and base.id in self.classes:
            return self.method(base.id, func.attr)
        return None

    def resolve_module_call(self, fn: FuncInfo, call: ast.Call) -> FuncInfo | None:
        """``self.sub(x)`` runs ``Sub.forward``."""
        attr = is_self_attr(call.func)
        if attr is not None and fn.cls is not None and self.method(fn.cls, attr) is None:
            return self.method(self.attr_class(fn.cls, attr), "forward")
        return None

    def callees(self, fn: FuncInfo) -> list[tuple[FuncInfo, bool, bool]]:
        """(target, in_loop, guarded) of each call that reaches an in-file function (memoised: hotness,
        the hook closures, the walk order and the walkers' selection all ask for the same functions)."""
        out = fn._callees
        if out is None:
            out = fn._callees = []
            for call, in_loop, guarded in fn.calls:
                target = self.resolve(fn, call) or self.resolve_module_call(fn, call)
                if target is not None and target is not fn:
                    out.append((target, in_loop, guarded))
        return out

    def _hotness(self) -> tuple[set[str], set[str]]:
        per_step: set[str] = set()
        hot: set[str] = set()
        work = [f for f in self.functions.values() if self.hook(f) is not None and not _cached(f.node)]
        hot_work: list[FuncInfo] = []
        for cls, name, is_hot in sorted(self.extra_entries):
            fn = self.method(cls, name) if cls else self.module_funcs.get(name)
            if fn is not None and not _cached(fn.node):
                work.append(fn)
                if is_hot and fn.qualname not in hot:
                    hot.add(fn.qualname)
                    hot_work.append(fn)
        per_step.update(f.qualname for f in work)
        while work:
            fn = work.pop()
            for target, in_loop, guarded in self.callees(fn):
                if _cached(target.node):
                    continue
                if guarded and not target.is_generator:
                    continue
                if in_loop and target.qualname not in hot:
                    hot.add(target.qualname)
                    hot_work.append(target)
                if target.qualname not in per_step:
                    per_step.add(target.qualname)
                    work.append(target)
        while hot_work:
            fn = hot_work.pop()
            for target, _in_loop, guarded in self.callees(fn):
                if guarded and not target.is_generator:
                    continue
                if target.qualname not in hot and not _cached(target.node):
                    hot.add(target.qualname)
                    per_step.add(target.qualname)
                    hot_work.append(target)
        return per_step, hot

    def imports(self) -> dict[str, tuple[str, int]]:
        """Local name -> (module, level) of `from module import name` at module level."""
        out = {}
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for a in node.names:
                    out[a.asname or a.name] = (node.module, node.level)
        return out

    def outgoing(self) -> list[tuple[str, int, str, str, bool]]:
        """Per-step calls into other modules: (module, level, class or "", function, hot) for
        `self.sub.method(...)`/`self.sub(...)` on an imported class and calls of imported functions."""
        imports = self.imports()
        if not imports:
            return []
        out = set()
        for qual in self.per_step:
            fn = self.functions[qual]
            fn_hot = qual in self.hot
            for call, in_loop, guarded in fn.calls:
                if guarded:
                    continue
                func = call.func
                target = None
                if isinstance(func, ast.Name) and func.id in imports and not func.id[:1].isupper():
                    target = (func.id, "", func.id)
                elif isinstance(func, ast.Attribute) and (attr := is_self_attr(func.value)) is not None:
                    cname = self.attr_class(fn.cls, attr)
                    if cname in imports and cname not in self.classes:
                        target = (cname, cname, func.attr)
                elif (attr := is_self_attr(func)) is not None and fn.cls and self.method(fn.cls, attr) is None:
                    cname = self.attr_class(fn.cls, attr)
                    if cname in imports and cname not in self.classes:
                        target = (cname, cname, "forward")
                # Hooks (forward, ...) are entry points in their own file already; only helpers a sibling
                # drives per step (`self.flow_head.solve(...)`) become extra entries there.
                if target is not None and target[2] not in self.hooks:
                    module, level = imports[target[0]]
                    out.add((module, level, target[1], target[2], fn_hot or in_loop))
        return sorted(out)

    def hook(self, fn: FuncInfo) -> StepHook | None:
        """The runner hook a method is: a method named like a per-step hook, or one the class installs as
        one (`self.set_custom_postprocess(self.talker_postprocess)`, `self.postprocess = self.fn`)."""
        if fn.cls is None:
            return None
        hook = self.hooks.get(fn.name)
        if hook is None:
            name = self.registered().get(fn.qualname)
            hook = self.hooks.get(name) if name else None
        return hook

    def registered(self) -> dict[str, str]:
        """qualname -> hook name for methods a class installs as a runner hook."""
        if self._registered is None:
            self._registered = {}
            text = "\n".join(self._lines) if self._lines is not None else None
            if text is None or "set_custom_" in text or any(f"self.{h} =" in text for h in self.hooks):
                for cls in self.classes.values():
                    for fn in cls.methods.values():
                        for stmt, _ctx in iter_stmts(fn.node.body):
                            self._register(cls, stmt)
        return self._registered

    def _register(self, cls: ClassInfo, stmt: ast.stmt) -> None:
        target, value = None, None
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and stmt.value.args:
            name = dotted(stmt.value.func)
            if name.startswith("self.") and name[5:] in HOOK_REGISTRARS:
                target, value = HOOK_REGISTRARS[name[5:]], stmt.value.args[0]
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            attr = is_self_attr(stmt.targets[0])
            if attr in self.hooks:
                target, value = attr, stmt.value
        if target is None or target not in self.hooks:
            return
        meth = is_self_attr(value)
        fn = self.method(cls.name, meth) if meth else None
        if fn is not None:
            self._registered[fn.qualname] = target

    def symbol_at(self, line: int) -> str:
        best, size = "<module>", 1 << 30
        for start, end, qual in self._spans:
            if start <= line <= end and end - start < size:
                best, size = qual, end - start
        return best

    def class_of(self, fn: FuncInfo) -> ClassInfo | None:
        return self.classes.get(fn.cls) if fn.cls else None
