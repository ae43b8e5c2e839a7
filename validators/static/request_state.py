"""Request-state analyses the I5 rules share: where a request-id value comes from (`IdEval`), the
per-request dicts of a model class with their inserts, frees and what the finish hook reaches
(`ClassState`), and the scalar-state helpers (attributes assigned per request)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from omnitts.knowledge.treefacts import ID_KEYS
from omnitts.validators.static.batch import request_facts
from omnitts.validators.static.index import FUNC_TYPES, ClassInfo, FuncInfo, dotted, is_self_attr, iter_stmts, walk
from omnitts.validators.static.source import SourceFile
from omnitts.validators.static.tensors import bind_args

SCHED, GLOBAL, CONST, OBJID = "sched", "global", "const", "objid"
FINISH_HOOK = "on_requests_finished"
_KEY_SOURCE = {"request_id": SCHED, "req_id": SCHED, "global_request_id": GLOBAL}
_DICT_FACTORIES = {
    "dict",
    "OrderedDict",
    "defaultdict",
    "collections.OrderedDict",
    "collections.defaultdict",
    "WeakValueDictionary",
}
_REQ_NAME = re.compile(r"(^|_)(req|request)_?(id|key|ids|keys)$|^(req|request|rid)$", re.I)
_LOG = re.compile(r"(^|\.)(logger|logging|log|_logger|LOGGER)\.")
_KEY_HELPER = re.compile(r"^_?(get_)?req(uest)?_?(id|key)s?$|^_?(resolve|extract)_req(uest)?_?(id|key)$")
STATE_WORDS = re.compile(r"cache|buffer|state|gen|stream|pad|window|history|prev|context|queue|pending", re.I)


def id_read(node: ast.AST) -> tuple[str, ast.AST | None] | None:
    """(key, default) when node reads a request-id key: x.get("k"[, d]), x["k"], getattr(x, "k"[, d])."""
    if isinstance(node, ast.Call):
        name = dotted(node.func)
        args = node.args
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and args:
            key, default = args[0], (args[1] if len(args) > 1 else None)
        elif name == "getattr" and len(args) >= 2:
            key, default = args[1], (args[2] if len(args) > 2 else None)
        else:
            return None
        if isinstance(key, ast.Constant) and key.value in ID_KEYS:
            return key.value, default
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in ID_KEYS:
        return node.slice.value, None
    return None


def is_const(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is not None and not isinstance(node.value, bool)


@dataclass
class IdEval:
    facts_keys: tuple[str, ...]

    def key_source(self, key: str) -> str:
        return _KEY_SOURCE.get(key, f"unset:{key}") if key in self.facts_keys else f"unset:{key}"

    def sources(self, node: ast.AST, env: dict[str, set[str]]) -> set[str]:
        """Where the value of an id expression comes from; the primary source first matters."""
        r = id_read(node)
        if r is not None:
            key, default = r
            out = {self.key_source(key)}
            return out
        if isinstance(node, ast.Name):
            return set(env.get(node.id, ()))
        if isinstance(node, ast.Constant):
            return {CONST} if node.value is not None else set()
        if isinstance(node, ast.BoolOp):
            return self.sources(node.values[0], env)  # primary source
        if isinstance(node, ast.IfExp):
            return self.sources(node.body, env) | self.sources(node.orelse, env)
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name == "id":
                return {OBJID}
            if _KEY_HELPER.search(name.split(".")[-1]):
                return {"named"}  # request_key(info), self._req_id(info): a helper that reads the id
            if name in ("str", "int", "repr", "hash") and node.args:
                return self.sources(node.args[0], env)
            return set()
        if isinstance(node, ast.Subscript):
            return self.sources(node.value, env)  # global_request_id[0]
        if isinstance(node, ast.JoinedStr):
            out: set[str] = set()
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    out |= self.sources(v.value, env)
            return out
        if isinstance(node, ast.Attribute) and node.attr in _KEY_SOURCE:
            return (
                {_KEY_SOURCE[node.attr]} if node.attr in self.facts_keys or node.attr != "global_request_id" else set()
            )
        return set()


@dataclass
class DictOps:
    inserts: list[tuple[FuncInfo, ast.AST, ast.AST, set[str]]] = field(default_factory=list)  # fn, node, key, sources
    frees: list[tuple[FuncInfo, ast.AST]] = field(default_factory=list)
    bounded: bool = False


class ClassState:
    """State analysis of one model class: per-request dicts, their inserts (with the id source of
    each key) and frees, and what the finish hook reaches. Only methods whose text mentions a dict
    attribute are analyzed; id sources of parameters come from in-class call sites, lazily."""

    def __init__(self, src: SourceFile, cls: ClassInfo) -> None:
        self.src, self.cls = src, cls
        self.idev = IdEval(src.facts.request_id_keys)
        self._envs: dict[str, dict[str, set[str]]] = {}
        self.dicts = self._dict_attrs()
        self.ops: dict[str, DictOps] = {d: DictOps() for d in self.dicts}
        self.finish: set[str] = set()
        if not self.dicts:
            return
        pattern = re.compile(r"self\.(" + "|".join(re.escape(d) for d in sorted(self.dicts)) + r")\b")
        for fn in cls.methods.values():
            if pattern.search(src.node_text(fn.node)):
                self._collect_ops(fn)
        if any(o.inserts for o in self.ops.values()):
            self.finish = self._finish_closure()
            evict = self._eviction_closure()
            for ops in self.ops.values():
                if any(f.qualname in evict for f, _n in ops.frees):
                    ops.bounded = True  # freed by a TTL/LRU eviction path: bounded, not leaked

    # --- id sources -----------------------------------------------------------------------
    def env(self, fn: FuncInfo, depth: int = 0) -> dict[str, set[str]]:
        if fn.qualname in self._envs:
            return self._envs[fn.qualname]
        self._envs[fn.qualname] = {}  # cycles
        env: dict[str, set[str]] = self._param_sources(fn, depth)
        lists = None
        for stmt, _ctx in iter_stmts(fn.node.body):
            if isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Tuple):
                # `for key, span in pending:` over the requests of the batch: the key is the request's.
                lists = request_facts(self.src).any_function(fn) if lists is None else lists
                if isinstance(stmt.iter, ast.Name) and stmt.iter.id in lists:
                    for e in stmt.target.elts:
                        if isinstance(e, ast.Name):
                            env[e.id] = env.get(e.id, set()) | {"named"}
            if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
                srcs = self.idev.sources(stmt.value, env)
                for t in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                    if isinstance(t, ast.Name) and srcs:
                        env[t.id] = env.get(t.id, set()) | srcs
            elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
                srcs = self.idev.sources(stmt.iter, env)
                if srcs:
                    env[stmt.target.id] = srcs
        self._envs[fn.qualname] = env
        return env

    def _param_sources(self, fn: FuncInfo, depth: int) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        if fn.name == FINISH_HOOK:
            args = [a.arg for a in fn.node.args.args[1:]]
            if args:
                out[args[0]] = {SCHED}
            return out
        if depth > 2:
            return out
        needle = f".{fn.name}("
        for caller in self.cls.methods.values():
            if caller is fn or needle not in self.src.node_text(caller.node):
                continue
            cenv = self.env(caller, depth + 1)
            for stmt, _ctx in iter_stmts(caller.node.body):
                if isinstance(stmt, FUNC_TYPES):
                    continue
                for expr in own_exprs(stmt):
                    for n in walk(expr):
                        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == fn.name:
                            if self.src.index.resolve(caller, n) is fn:
                                for name, arg in bind_args(self.src.index, fn, n):
                                    srcs = self.idev.sources(arg, cenv)
                                    if srcs:
                                        out[name] = out.get(name, set()) | srcs
        return out

    # --- dict attributes and their operations ---------------------------------------------------
    def _dict_attrs(self) -> set[str]:
        out = set()
        for attr, values in self.cls.attr_values.items():
            for v in values:
                if isinstance(v, ast.Dict) or (isinstance(v, ast.Call) and dotted(v.func) in _DICT_FACTORIES):
                    out.add(attr)
        return out

    def _collect_ops(self, fn: FuncInfo) -> None:
        env = None
        # An eviction sweep (pops inside a loop over some dict's items/keys: TTL or LRU clean-up)
        # bounds the dicts it pops even without a finish hook.
        sweep = any(
            isinstance(n, ast.For | ast.comprehension)
            and any(
                isinstance(c, ast.Call)
                and isinstance(c.func, ast.Attribute)
                and c.func.attr in ("items", "keys")
                and is_self_attr(c.func.value) is not None
                for c in walk(n.iter)
            )
            for n in walk(fn.node)
        )
        # `state = self._state; state.pop(rid)`: a local bound to one of the dicts is that dict (the
        # same object), for inserts and frees alike.
        aliases = self._local_aliases(fn)

        def dict_of(node: ast.AST) -> str | None:
            if isinstance(node, ast.Name):
                a = aliases.get(node.id)
                return a if isinstance(a, str) else None
            return is_self_attr(node)

        # Closures defined in the method run as part of it (a free or insert there is the method's).
        bodies = [fn.node.body] + [n.body for n in walk(fn.node) if isinstance(n, FUNC_TYPES) and n is not fn.node]
        for stmt, _ctx in (pair for body in bodies for pair in iter_stmts(body)):
            if isinstance(stmt, FUNC_TYPES):
                continue
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    if isinstance(t, ast.Subscript) and (d := dict_of(t.value)) in self.ops:
                        env = env if env is not None else self.env(fn)
                        self.ops[d].inserts.append((fn, stmt, t.slice, self._key_sources(t.slice, env)))
                    elif (
                        (d := is_self_attr(t)) in self.ops
                        and fn.name != "__init__"
                        and isinstance(stmt.value, ast.Dict | ast.Call)
                    ):
                        self.ops[d].frees.append((fn, stmt))
            elif isinstance(stmt, ast.Delete):
                for t in stmt.targets:
                    if isinstance(t, ast.Subscript) and (d := dict_of(t.value)) in self.ops:
                        self.ops[d].frees.append((fn, stmt))
            for expr in own_exprs(stmt):
                for n in walk(expr):
                    if type(n) is not ast.Call:
                        continue
                    func = n.func
                    if isinstance(func, ast.Name) and func.id in aliases:
                        func = aliases[func.id]  # `pop = self._state.pop; pop(rid)`
                    if isinstance(func, ast.Attribute):
                        d = dict_of(func.value)
                        if d not in self.ops:
                            continue
                        m = func.attr
                        if m in ("pop", "clear"):
                            self.ops[d].frees.append((fn, n))
                            if sweep:
                                self.ops[d].bounded = True
                        elif m == "popitem":
                            self.ops[d].frees.append((fn, n))
                            self.ops[d].bounded = True
                        elif m == "setdefault" and n.args:
                            env = env if env is not None else self.env(fn)
                            self.ops[d].inserts.append((fn, n, n.args[0], self._key_sources(n.args[0], env)))
                    elif dotted(n.func) == "len" and n.args and is_self_attr(n.args[0]) in self.ops:
                        self.ops[is_self_attr(n.args[0])].bounded = True

    def _local_aliases(self, fn: FuncInfo) -> dict[str, str | ast.Attribute]:
        """Locals bound exactly once in ``fn`` to ``self.<dict>`` (name -> the dict attribute) or to one of
        its bound methods (name -> the ``self.<dict>.<method>`` expression)."""
        bound: dict[str, list[ast.AST | None]] = {}

        def bind(target: ast.AST | None, value: ast.AST | None) -> None:
            if isinstance(target, ast.Name):
                bound.setdefault(target.id, []).append(value)
            elif isinstance(target, ast.Tuple | ast.List):
                for e in target.elts:
                    bind(e, None)
            elif isinstance(target, ast.Starred):
                bind(target.value, None)

        for n in walk(fn.node):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    bind(t, n.value)
            elif isinstance(n, ast.AugAssign | ast.AnnAssign | ast.For | ast.NamedExpr | ast.comprehension):
                bind(n.target, None)
            elif isinstance(n, ast.With):
                for i in n.items:
                    bind(i.optional_vars, None)
        once = {name: values[0] for name, values in bound.items() if len(values) == 1 and values[0] is not None}
        out: dict = {}
        changed = True
        while changed:  # aliases of aliases (`a = self._state; b = a`)
            changed = False
            for name, v in once.items():
                if name in out:
                    continue
                if isinstance(v, ast.Name) and isinstance(out.get(v.id), str):
                    out[name] = out[v.id]
                elif is_self_attr(v) in self.ops:
                    out[name] = is_self_attr(v)
                elif isinstance(v, ast.Attribute) and is_self_attr(v.value) in self.ops:
                    out[name] = v  # a bound method of the dict: calls through the name are calls of it
                else:
                    continue
                changed = True
        return out

    def _key_sources(self, key: ast.AST, env: dict[str, set[str]]) -> set[str]:
        srcs = self.idev.sources(key, env)
        if not srcs and any(_REQ_NAME.search(n.id) for n in walk(key) if isinstance(n, ast.Name)):
            srcs = {"named"}
        if not srcs and any(_REQ_NAME.search(n.attr) for n in walk(key) if isinstance(n, ast.Attribute)):
            srcs = {"named"}
        return srcs

    def per_request(self, d: str) -> bool:
        return any(
            s & {SCHED, GLOBAL, "named"} or any(x.startswith("unset:") for x in s)
            for _f, _n, _k, s in self.ops[d].inserts
        )

    def _eviction_closure(self) -> set[str]:
        """Methods on an eviction path: ones that pop the oldest entry (`popitem`, `next(iter(...))`),
        sweep a dict's items/keys, or bound a dict's size (`while len(self.d) > n`), and what they call."""
        seeds = []
        for fn in self.cls.methods.values():
            text = self.src.node_text(fn.node)
            if not (
                "popitem" in text
                or "next(iter(self." in text
                or ".items()" in text
                or ".keys()" in text
                or "while len(self." in text
            ):
                continue
            for n in walk(fn.node):
                if (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "popitem"
                    and is_self_attr(n.func.value) is not None
                ):
                    seeds.append(fn)
                    break
                if (
                    isinstance(n, ast.For | ast.comprehension | ast.While)
                    and any(
                        isinstance(c, ast.Call)
                        and isinstance(c.func, ast.Attribute)
                        and c.func.attr in ("items", "keys")
                        and is_self_attr(c.func.value) is not None
                        for c in walk(n.test if isinstance(n, ast.While) else n.iter)
                    )
                    or (
                        isinstance(n, ast.Call)
                        and dotted(n.func) == "next"
                        and n.args
                        and "self." in ast.unparse(n.args[0])
                    )
                ):
                    seeds.append(fn)
                    break
        seen: set[str] = set()
        work = list(seeds)
        while work:
            fn = work.pop()
            if fn.qualname in seen:
                continue
            seen.add(fn.qualname)
            work.extend(t for t, _l, _g in self.src.index.callees(fn))
        return seen

    # --- the finish hook ----------------------------------------------------------------------
    def _finish_closure(self) -> set[str]:
        hook = self.src.index.method(self.cls.name, FINISH_HOOK)
        if hook is None:
            return set()
        seeds = [hook]
        written = set()
        for n in walk(hook.node):
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("update", "add", "extend", "append", "__setitem__")
            ):
                if (a := is_self_attr(n.func.value)) is not None:
                    written.add(a)
            elif isinstance(n, ast.Assign):
                for t in n.targets:
                    a = is_self_attr(t.value if isinstance(t, ast.Subscript) else t)
                    if a is not None:
                        written.add(a)
        # Deferred cleanup: methods that read what the hook recorded (voxcpm2's _deferred_cleanup_ids).
        if written:
            pattern = re.compile(r"self\.(" + "|".join(re.escape(a) for a in sorted(written)) + r")\b")
            for fn in self.cls.methods.values():
                if fn is not hook and pattern.search(self.src.node_text(fn.node)):
                    seeds.append(fn)
        seen: set[str] = set()
        work = list(seeds)
        while work:
            fn = work.pop()
            if fn.qualname in seen:
                continue
            seen.add(fn.qualname)
            work.extend(t for t, _l, _g in self.src.index.callees(fn))
        return seen


def own_exprs(stmt: ast.stmt) -> list[ast.AST]:
    from omnitts.validators.static.index import stmt_exprs

    return stmt_exprs(stmt)


def class_states(src: SourceFile) -> list[ClassState]:
    cached = src.__dict__.get("_i5")
    if cached is None:
        cached = [ClassState(src, cls) for cls in src.index.classes.values() if cls.methods]
        src.__dict__["_i5"] = cached
    return cached


def in_logging(src: SourceFile, node: ast.AST) -> bool:
    line = src.lines[node.lineno - 1] if node.lineno <= len(src.lines) else ""
    return bool(_LOG.search(line)) or "print(" in line


SELF_ASSIGN = re.compile(r"self\.\w+\s*=[^=]")


def is_flagish(v: ast.AST) -> bool:
    return isinstance(v, ast.Compare | ast.BoolOp) or (isinstance(v, ast.Call) and dotted(v.func) == "bool")
