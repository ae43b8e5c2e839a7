"""Semantics-preserving rewrites of real code around a marked span: the metamorphic half of
`benchmarks/static_recall.py`.

A rule that keys on what values *are* keeps its verdict when the code around a bug is written
differently; a rule that keys on the names and shapes of the mined corpus does not. Each rewrite
below changes how the code around one corpus span is written and nothing it computes:

- ``rename``: the enclosing function's local variables (and its private helpers' parameters,
  ``**kwargs``), the private data attributes of ``self`` it touches, and the string keys of
  containers held in those attributes, to neutral names (``v1``, ``_a1``, ``"k1"``);
- ``extract``: the span's statements move into a new method (or module function) that receives the
  locals it reads as parameters and returns what it assigns;
- ``dict-param``: the same, and every dict the statements index through an attribute or subscript
  chain (``out.outputs[0].multimodal_output``, ``self._state[rid]``) is evaluated by the caller and
  passed in as a parameter;
- ``closure``: the statements move into a nested function defined in place;
- ``alias``: every local and ``self`` data attribute the statements read is read through an alias
  bound just before them;
- ``temp``: the first call the statement completes is hoisted into a temporary;
- ``move`` (consumers only): the file moves between examples, tests and benchmarks;
- ``loop-index`` / ``loop-while``: the loop around the span iterates by index
  (``for i in range(len(xs)): x = xs[i]``) or becomes a ``while`` loop.

The span is tracked with a marker comment appended to its lines before the rewrite (comments move
with the code they sit on) and stripped afterwards. A rewrite that does not apply to a span returns
None; one that produces code that does not parse raises (a bug of the rewriter, never skipped).

    from benchmarks.metamorphic import variants
    for v in variants(text, path, (120, 122), consumer=False): ...
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass

MARK = "# @omnitts-span"
_MARK_RE = re.compile(r"  # @omnitts-span")
CONSUMER_DIRS = ("tests/", "examples/", "benchmarks/")


@dataclass(frozen=True)
class Variant:
    transform: str
    text: str
    path: str
    lines: tuple[tuple[int, int], ...]  # runs of the span's lines in the rewritten file


class RewriteError(RuntimeError):
    """A rewrite produced code that does not parse (a bug of the rewriter)."""


# --- marking ------------------------------------------------------------------------------------
def _string_interior_lines(text: str) -> set[int]:
    """Lines on which a multi-line string starts or continues (appending there changes the string)."""
    out: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING and tok.start[0] != tok.end[0]:
                out.update(range(tok.start[0], tok.end[0]))
            elif tok.type == getattr(tokenize, "FSTRING_START", -1):
                pass
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def mark(text: str, span: tuple[int, int]) -> str | None:
    """``text`` with the marker appended to every line of ``span`` where a comment can go."""
    lines = text.split("\n")
    inside = _string_interior_lines(text)
    a, b = span
    marked = 0
    for i in range(a, b + 1):
        if i < 1 or i > len(lines) or i in inside:
            continue
        line = lines[i - 1]
        if not line.strip() or line.strip().startswith("#") or line.rstrip().endswith("\\"):
            continue  # blank and comment-only lines stay where they are when code moves: not the span
        lines[i - 1] = line.rstrip() + "  " + MARK
        marked += 1
    return "\n".join(lines) if marked else None


def unmark(text: str) -> tuple[str, tuple[tuple[int, int], ...]] | None:
    """The text without markers, and the marked lines as runs ((first, last), ...): code that moved apart
    (a helper's body and the call that replaced it) is scored where each part now is."""
    lines = text.split("\n")
    hits = [i + 1 for i, line in enumerate(lines) if MARK in line]
    if not hits:
        return None
    runs: list[list[int]] = []
    for h in hits:
        if (
            runs
            and h - runs[-1][1] <= 1
            or (runs and all(not ln.strip() or ln.strip().startswith("#") for ln in lines[runs[-1][1] : h - 1]))
        ):
            runs[-1][1] = h
        else:
            runs.append([h, h])
    return _MARK_RE.sub("", text), tuple((a, b) for a, b in runs)


# --- positions and edits ---------------------------------------------------------------------------
class Source:
    """Text, tree and helpers to turn AST positions (UTF-8 byte columns) into text offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tree = ast.parse(text)
        self.lines = text.split("\n")
        self._starts = [0]
        for line in self.lines:
            self._starts.append(self._starts[-1] + len(line) + 1)
        self.parent: dict[int, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[id(child)] = node

    def off(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self._starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))

    def start(self, node: ast.AST) -> int:
        return self.off(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.off(node.end_lineno, node.end_col_offset)

    def seg(self, node: ast.AST) -> str:
        return self.text[self.start(node) : self.end(node)]

    def line_start(self, lineno: int) -> int:
        return self._starts[lineno - 1]

    def line_end(self, lineno: int) -> int:
        return self._starts[lineno - 1] + len(self.lines[lineno - 1])

    def indent(self, lineno: int) -> str:
        line = self.lines[lineno - 1]
        return line[: len(line) - len(line.lstrip())]

    def parents(self, node: ast.AST):
        while id(node) in self.parent:
            node = self.parent[id(node)]
            yield node

    def names(self) -> set[str]:
        out: set[str] = set()
        for n in ast.walk(self.tree):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Attribute):
                out.add(n.attr)
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.add(n.name)
            elif isinstance(n, ast.arg):
                out.add(n.arg)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                out.add(n.value)
        return out


def apply_edits(text: str, edits: list[tuple[int, int, str]]) -> str:
    edits = sorted(edits, key=lambda e: (e[0], e[1]))
    for (_a1, b1, _), (a2, _b2, _) in zip(edits, edits[1:], strict=False):
        if a2 < b1:
            raise RewriteError("overlapping edits")
    out, last = [], 0
    for a, b, rep in edits:
        out.append(text[last:a])
        out.append(rep)
        last = b
    out.append(text[last:])
    return "".join(out)


class Fresh:
    """Neutral names that collide with nothing in the file."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)
        self.n: dict[str, int] = {}

    def __call__(self, prefix: str) -> str:
        while True:
            self.n[prefix] = self.n.get(prefix, 0) + 1
            name = f"{prefix}{self.n[prefix]}"
            if name not in self.taken:
                self.taken.add(name)
                return name


# --- structure around the span -------------------------------------------------------------------
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BODIES = ("body", "orelse", "finalbody")


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    out = [getattr(node, f) for f in _BODIES if isinstance(getattr(node, f, None), list)]
    out += [h.body for h in getattr(node, "handlers", []) or []]
    out += [c.body for c in getattr(node, "cases", []) or []]
    return [b for b in out if b and isinstance(b[0], ast.stmt)]


def _header_end(stmt: ast.stmt) -> int:
    """Last line of a compound statement's header (the line before its first nested statement)."""
    firsts = [b[0].lineno for b in _blocks(stmt)]
    return min(firsts) - 1 if firsts else stmt.end_lineno


def target_block(src: Source, span: tuple[int, int]) -> list[ast.stmt] | None:
    """The statements of the innermost body that hold the span (a run of siblings)."""
    a, b = span
    body: list[ast.stmt] = src.tree.body
    while True:
        hit = [s for s in body if s.lineno <= b and s.end_lineno >= a]
        if not hit:
            return None
        if len(hit) == 1 and _blocks(hit[0]) and a > _header_end(hit[0]):
            inner = next((blk for blk in _blocks(hit[0]) if blk[0].lineno <= b and blk[-1].end_lineno >= a), None)
            if inner is None:
                return hit
            body = inner
            continue
        return hit


def enclosing_function(src: Source, node: ast.AST) -> ast.AST | None:
    return next((p for p in src.parents(node) if isinstance(p, FUNCS)), None)


def _own(node: ast.AST):
    """Nodes of ``node`` not inside nested functions, lambdas or classes."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if not isinstance(c, FUNCS + (ast.Lambda, ast.ClassDef)):
                stack.append(c)


def _comp_bound(node: ast.AST) -> set[int]:
    """ids of Name nodes bound by comprehensions or lambdas inside ``node`` (their own scopes)."""
    out: set[int] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            bound = {t.id for g in n.generators for t in ast.walk(g.target) if isinstance(t, ast.Name)}
            for x in ast.walk(n):
                if isinstance(x, ast.Name) and x.id in bound:
                    out.add(id(x))
        elif isinstance(n, ast.Lambda):
            bound = {a.arg for a in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs]}
            bound |= {a.arg for a in (n.args.vararg, n.args.kwarg) if a is not None}
            for x in ast.walk(n.body):
                if isinstance(x, ast.Name) and x.id in bound:
                    out.add(id(x))
    return out


def _params(fn: ast.AST) -> list[str]:
    a = fn.args
    out = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    out += [x.arg for x in (a.vararg, a.kwarg) if x is not None]
    return out


def function_locals(fn: ast.AST) -> set[str]:
    """Parameters and names the function binds (nested defs included, comprehension targets not)."""
    out = set(_params(fn))
    declared = set()
    for n in _own(fn):
        if isinstance(n, ast.Global | ast.Nonlocal):
            declared.update(n.names)
    comp = _comp_bound(fn)
    for n in _own(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del) and id(n) not in comp:
            out.add(n.id)
        elif isinstance(n, FUNCS + (ast.ClassDef,)) and n is not fn:
            out.add(n.name)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
    return out - declared


def _scope_locals(src: Source, fn: ast.AST) -> set[str]:
    """Locals of ``fn`` and of the functions it is nested in (closure variables are values too)."""
    out = function_locals(fn)
    for p in src.parents(fn):
        if isinstance(p, FUNCS):
            out |= function_locals(p)
    return out


def _method_class(src: Source, fn: ast.AST) -> ast.ClassDef | None:
    p = src.parent.get(id(fn))
    if isinstance(p, ast.ClassDef) and _params(fn)[:1] in (["self"], ["cls"]):
        deco = {ast.unparse(d) for d in fn.decorator_list}
        if not deco & {"staticmethod"}:
            return p
    return None


def _extractable(stmts: list[ast.stmt]) -> bool:
    for s in stmts:
        loops = 0

        def bad(n: ast.AST, depth: int) -> bool:
            if isinstance(n, FUNCS + (ast.Lambda, ast.ClassDef)):
                return False
            if isinstance(n, ast.Return | ast.Yield | ast.YieldFrom | ast.Await | ast.Global | ast.Nonlocal):
                return True
            if isinstance(n, ast.AsyncFor | ast.AsyncWith):
                return True
            if isinstance(n, ast.Break | ast.Continue) and depth == 0:
                return True
            if isinstance(n, ast.Delete) and any(isinstance(t, ast.Name) for t in n.targets):
                return True
            inner = depth + (1 if isinstance(n, ast.For | ast.While) else 0)
            for c in ast.iter_child_nodes(n):
                # a loop's else runs outside the loop: its break/continue target the enclosing loop
                d = depth if isinstance(n, ast.For | ast.While) and c in n.orelse else inner
                if bad(c, d):
                    return True
            return False

        if bad(s, loops):
            return False
        for n in ast.walk(s):
            if isinstance(n, ast.JoinedStr | ast.Constant) and n.lineno != n.end_lineno:
                if isinstance(n, ast.JoinedStr) or isinstance(n.value, str | bytes):
                    return False  # re-indenting would change a multi-line string
            if isinstance(n, ast.NamedExpr):
                return False
    return True


def _whole_lines(src: Source, stmts: list[ast.stmt]) -> bool:
    """The statements own their lines (no `a; b` sharing, no one-line compound headers)."""
    first, last = stmts[0], stmts[-1]
    before = src.lines[first.lineno - 1][: len(src.lines[first.lineno - 1].encode()[: first.col_offset].decode())]
    if before.strip():
        return False
    tail = src.text[src.end(last) : src.line_end(last.end_lineno)]
    return not tail.strip() or tail.strip().startswith("#")


def _stmt_expr(stmt: ast.stmt) -> ast.AST | None:
    """The expression of a statement that can move into a helper when the statement cannot."""
    if isinstance(stmt, ast.Return | ast.Assign | ast.AnnAssign | ast.AugAssign):
        return stmt.value
    if isinstance(stmt, ast.If | ast.While):
        return stmt.test
    if isinstance(stmt, ast.For):
        return stmt.iter
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return stmt.value
    return None


def _expr_ok(expr: ast.AST) -> bool:
    for n in ast.walk(expr):
        if isinstance(n, ast.Await | ast.Yield | ast.YieldFrom | ast.NamedExpr):
            return False
        if isinstance(n, ast.JoinedStr | ast.Constant) and n.lineno != n.end_lineno:
            if isinstance(n, ast.JoinedStr) or isinstance(n.value, str | bytes):
                return False
    return True


def extract_target(src: Source, span: tuple[int, int]) -> tuple[list[ast.stmt], ast.AST | None] | None:
    """The smallest run of statements around the span that can move into a helper, with None; or a
    single statement and the expression of it that moves instead (`return X`, `if X:` with a
    `continue` inside). Module-level runs move too."""
    block = target_block(src, span)
    while block:
        if isinstance(block[0], FUNCS + (ast.ClassDef,)):
            return None
        if _whole_lines(src, block) and not _is_elif(src, block[0]) and _extractable(block):
            return block, None
        if len(block) == 1:
            expr = _stmt_expr(block[0])
            if expr is not None and _expr_ok(expr) and not isinstance(expr, ast.Constant):
                return block, expr
        parent = src.parent.get(id(block[0]))
        if isinstance(parent, ast.ExceptHandler | ast.match_case):
            parent = src.parent.get(id(parent))
        if parent is None or isinstance(parent, FUNCS + (ast.Module, ast.ClassDef)):
            return None
        block = [parent]
    return None


def definitely_bound(stmts: list[ast.stmt]) -> set[str]:
    """Names every path through the statements binds (loops may not run; a raise binds everything)."""
    out: set[str] = set()
    for st in stmts:
        if isinstance(st, ast.Assign | ast.AnnAssign | ast.AugAssign):
            for tgt in st.targets if isinstance(st, ast.Assign) else [st.target]:
                out |= {t.id for t in ast.walk(tgt) if isinstance(t, ast.Name)}
        elif isinstance(st, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).split(".")[0] for a in st.names}
        elif isinstance(st, FUNCS + (ast.ClassDef,)):
            out.add(st.name)
        elif isinstance(st, ast.If):
            a, b = _bound_or_exits(st.body), _bound_or_exits(st.orelse)
            out |= a if b is None else b if a is None else a & b
        elif isinstance(st, ast.With):
            out |= definitely_bound(st.body)
        elif isinstance(st, ast.Try):
            paths = [definitely_bound(st.body + st.orelse)]
            paths += [x for h in st.handlers if (x := _bound_or_exits(h.body)) is not None]
            common = set.intersection(*paths) if paths else set()
            out |= common | definitely_bound(st.finalbody)
    return out


def _bound_or_exits(stmts: list[ast.stmt]) -> set[str] | None:
    """What a branch binds, or None when it always leaves (raise/return/continue/break)."""
    if stmts and isinstance(stmts[-1], ast.Raise | ast.Return | ast.Continue | ast.Break):
        return None
    return definitely_bound(stmts)


# --- rename ----------------------------------------------------------------------------------------
def _is_hook_like(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def rename(src: Source, span: tuple[int, int], fresh: Fresh) -> str | None:
    block = target_block(src, span)
    if not block:
        return None
    fn = enclosing_function(src, block[0]) or (block[0] if isinstance(block[0], FUNCS) else None)
    edits: list[tuple[int, int, str]] = []
    scope = fn if fn is not None else ast.Module(body=block, type_ignores=[])
    # 1. locals (not parameters, except **kwargs/*args and those of private helpers no caller names)
    fstr = {id(x) for n in ast.walk(scope) if isinstance(n, ast.JoinedStr) for x in ast.walk(n)}
    fstr_names = {
        x.id for n in ast.walk(scope) if isinstance(n, ast.JoinedStr) for x in ast.walk(n) if isinstance(x, ast.Name)
    }
    if fn is not None:
        locs = function_locals(fn)
        params = _params(fn)
        keep = set(params)
        a = fn.args
        for star in (a.vararg, a.kwarg):
            if star is not None:
                keep.discard(star.arg)
        if fn.name.startswith("_") and not fn.name.startswith("__"):
            kw_used = {
                k.arg
                for c in ast.walk(src.tree)
                if isinstance(c, ast.Call) and (ast.unparse(c.func).split(".")[-1] == fn.name)
                for k in c.keywords
            }
            keep = {p for p in keep if p in kw_used or p in ("self", "cls")}
        nested_defs = {n.name for n in ast.walk(fn) if isinstance(n, FUNCS + (ast.ClassDef,)) and n is not fn}
        mapping = {
            n: fresh("v")
            for n in sorted(locs)
            if n not in keep and n not in nested_defs and n not in fstr_names and n not in ("self", "cls", "_")
        }
        # names also bound as parameters of nested functions would change those functions' signatures
        for n in ast.walk(fn):
            if isinstance(n, FUNCS + (ast.Lambda,)) and n is not fn:
                for p in _params(n):
                    mapping.pop(p, None)
        for n in ast.walk(fn):
            if isinstance(n, ast.Name) and n.id in mapping and id(n) not in fstr:
                edits.append((src.start(n), src.end(n), mapping[n.id]))
            elif isinstance(n, ast.arg) and n.arg in mapping:
                s = src.start(n)
                edits.append((s, s + len(n.arg), mapping[n.arg]))
    # 2. private data attributes of self the span's function touches, file-wide
    cls = next((p for p in src.parents(block[0]) if isinstance(p, ast.ClassDef)), None)
    attr_map: dict[str, str] = {}
    if cls is not None:
        methods = {n.name for n in ast.walk(src.tree) if isinstance(n, FUNCS)}
        strings = {n.value for n in ast.walk(src.tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        where = fn if fn is not None else cls
        used = {
            n.attr
            for n in ast.walk(where)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in ("self", "cls")
        }
        all_attr = [n for n in ast.walk(src.tree) if isinstance(n, ast.Attribute)]
        for attr in sorted(used):
            if not attr.startswith("_") or attr.startswith("__") or attr in methods or attr in strings:
                continue
            occ = [n for n in all_attr if n.attr == attr]
            if all(isinstance(n.value, ast.Name) and n.value.id in ("self", "cls") for n in occ):
                attr_map[attr] = fresh("_a")
        for n in all_attr:
            if n.attr in attr_map and n.end_lineno == n.value.end_lineno:
                e = src.end(n)
                edits.append((e - len(n.attr), e, attr_map[n.attr]))
    # 3. string keys of containers held in (renamed) private attributes, when that is all the key is used for
    if attr_map:
        edits += _rename_keys(src, set(attr_map), fresh)
    if fn is None:
        edits += _rename_module_imports(src, block, fresh)
    if not edits:
        return None
    return apply_edits(src.text, _dedupe(edits))


def _rename_module_imports(src: Source, block: list[ast.stmt], fresh: Fresh) -> list[tuple[int, int, str]]:
    """Module level: names the block imports get a neutral local name (`import x as v1`), file-wide."""
    exported = {
        e.value
        for n in ast.walk(src.tree)
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
        for e in ast.walk(n.value)
        if isinstance(e, ast.Constant)
    }
    fstr = {
        x.id for n in ast.walk(src.tree) if isinstance(n, ast.JoinedStr) for x in ast.walk(n) if isinstance(x, ast.Name)
    }
    edits = []
    mapping: dict[str, str] = {}
    for st in block:
        for n in ast.walk(st):
            if not isinstance(n, ast.Import | ast.ImportFrom):
                continue
            for a in n.names:
                local = a.asname or a.name.split(".")[0]
                if (
                    a.name == "*"
                    or local in exported
                    or local in fstr
                    or (isinstance(n, ast.Import) and "." in a.name and not a.asname)
                ):
                    continue
                new = mapping.setdefault(local, fresh("v"))
                line = src.lines[n.lineno - 1] if n.lineno == n.end_lineno else None
                if line is None:
                    continue
                pat = re.compile(r"\b" + re.escape(a.name) + r"(\s+as\s+\w+)?\b")
                m = pat.search(line, len(line.encode()[: n.col_offset].decode()) + 6)
                if m is None:
                    mapping.pop(local, None)
                    continue
                base = src.line_start(n.lineno)
                edits.append((base + m.start(), base + m.end(), f"{a.name} as {new}"))
    if mapping:
        for n in ast.walk(src.tree):
            if isinstance(n, ast.Name) and n.id in mapping:
                edits.append((src.start(n), src.end(n), mapping[n.id]))
    return edits


def _root_attr(node: ast.AST) -> str | None:
    """`_x` for `self._x`, `self._x[k]["a"]`, `self._x.get(k)`: the attribute a container chain starts at."""
    while True:
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                return node.attr
            node = node.value
        elif isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        else:
            return None


def _rename_keys(src: Source, attrs: set[str], fresh: Fresh) -> list[tuple[int, int, str]]:
    uses: dict[str, list[ast.Constant]] = {}
    bad: set[str] = set()
    key_nodes: set[int] = set()
    for n in ast.walk(src.tree):
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
            if _root_attr(n.value) in attrs:
                key_nodes.add(id(n.slice))
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("get", "pop", "setdefault")
            and n.args
            and isinstance(n.args[0], ast.Constant)
            and isinstance(n.args[0].value, str)
            and _root_attr(n.func.value) in attrs
        ):
            key_nodes.add(id(n.args[0]))
    for n in ast.walk(src.tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            uses.setdefault(n.value, []).append(n)
            if id(n) not in key_nodes:
                bad.add(n.value)
    edits = []
    for key, nodes in sorted(uses.items()):
        if key in bad or not key.isidentifier():
            continue
        new = fresh("k")
        for c in nodes:
            if c.lineno == c.end_lineno:
                edits.append((src.start(c), src.end(c), repr(new)))
    return edits


def _dedupe(edits):
    seen, out = set(), []
    for e in edits:
        if (e[0], e[1]) not in seen:
            seen.add((e[0], e[1]))
            out.append(e)
    return out


# --- extract helpers -------------------------------------------------------------------------------
def _names_loaded(stmts: list[ast.stmt]) -> list[str]:
    out: list[str] = []
    for s in stmts:
        comp = _comp_bound(s)
        for n in ast.walk(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in comp and n.id not in out:
                out.append(n.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id not in out:
                out.append(n.target.id)  # `x += 1` reads x
    return out


def _names_stored(stmts: list[ast.stmt]) -> list[str]:
    out: list[str] = []
    for s in stmts:
        comp = _comp_bound(s)
        for n in _own(s):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in comp and n.id not in out:
                out.append(n.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and n.target.id not in out:
                out.append(n.target.id)
            elif isinstance(n, FUNCS + (ast.ClassDef,)) and n.name not in out:
                out.append(n.name)
            elif isinstance(n, ast.alias):
                nm = (n.asname or n.name).split(".")[0]
                if nm not in out:
                    out.append(nm)
    return out


def _inside(node: ast.AST, stmts: list[ast.stmt]) -> bool:
    return any(s.lineno <= node.lineno and node.end_lineno <= s.end_lineno for s in stmts)


def _loops_around(src: Source, node: ast.AST, fn: ast.AST) -> list[ast.AST]:
    out = []
    for p in src.parents(node):
        if p is fn:
            break
        if isinstance(p, ast.For | ast.While | ast.AsyncFor):
            out.append(p)
    return out


def _dict_bases(stmts: list[ast.stmt], stored: set[str]) -> list[ast.AST]:
    """Attribute/subscript chains the statements index or `.get` from (not plain names, no calls)."""
    found: list[ast.AST] = []
    for s in stmts:
        comp = _comp_bound(s)
        for n in ast.walk(s):
            base = None
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load):
                base = n.value
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("get", "items", "keys", "values")
            ):
                base = n.func.value
            if base is None or isinstance(base, ast.Name):
                continue
            parts = list(ast.walk(base))
            if any(isinstance(x, ast.Call | ast.Lambda | ast.NamedExpr) for x in parts):
                continue
            if any(isinstance(x, ast.Name) and (x.id in stored or id(x) in comp) for x in parts):
                continue
            if not any(isinstance(x, ast.Name) for x in parts):
                continue
            found.append(base)
    # outermost first; an inner chain of a chosen one is not hoisted again
    found.sort(key=lambda b: -len(ast.unparse(b)))
    chosen: list[ast.AST] = []
    for b in found:
        if any(b is x or any(b is y for y in ast.walk(x)) for x in chosen):
            continue
        chosen.append(b)
    # stores into a chain (self._s[k] = ...) make reading it before the block unsafe
    store_txt = [
        ast.unparse(t)
        for s in stmts
        for n in ast.walk(s)
        if isinstance(n, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete)
        for t in (n.targets if isinstance(n, ast.Assign | ast.Delete) else [n.target])
    ]
    out = []
    for b in chosen:
        bt = ast.unparse(b)
        if any(t.startswith(bt) or bt.startswith(t) for t in store_txt):
            continue
        out.append(b)
    return out


def _module_names(src: Source) -> set[str]:
    return {n.id for n in ast.walk(src.tree) if isinstance(n, ast.Name)} | {
        (a.asname or a.name).split(".")[0]
        for n in ast.walk(src.tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }


def _extract(src: Source, span: tuple[int, int], fresh: Fresh, style: str) -> str | None:
    """style: "method" (a method of the class, or a module function), "function" (a module function
    that receives the model object as a parameter), "closure" (a nested function defined in place),
    "dict-param" (as "method", with every indexed attribute/subscript chain passed in)."""
    found = extract_target(src, span)
    if found is None:
        return None
    block, expr = found
    fn = enclosing_function(src, block[0])
    if fn is None and style in ("closure", "function"):
        return None  # at module level these are the module function `extract` writes
    cls = _method_class(src, fn) if fn is not None else None
    self_name = _params(fn)[0] if cls is not None else None
    if style == "function" and cls is None:
        return None
    region_root = fn if fn is not None else src.tree
    # module level: every module global is visible to a module function; nothing needs passing
    locs = _scope_locals(src, fn) if fn is not None else set()
    moved: list[ast.AST] = block if expr is None else [expr]
    loaded = [n for n in _names_loaded(moved) if n in locs]
    if expr is not None:
        stored = []
    elif fn is None:
        stored = _names_stored(block)  # module globals the block binds: all of them go back to the module
    else:
        stored = [n for n in _names_stored(block) if n in locs]
    # what the function reads after (or, inside a loop, anywhere in the loop) the block
    loops = _loops_around(src, block[0], fn) if fn is not None else []
    region = loops[-1] if loops else region_root
    later = set()
    for n in ast.walk(region_root):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and not _inside(n, block):
            # read after the block, or anywhere in a loop around it (the next iteration)
            if n.lineno > block[-1].end_lineno or (loops and _inside(n, [region])):
                later.add(n.id)
    returns = [n for n in stored if n in later or fn is None]
    # stored names the block may not bind: passed in so that the helper starts from their value
    bound_before = set(_params(fn)) if fn is not None else set()
    for n in ast.walk(region_root):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.lineno < block[0].lineno:
            bound_before.add(n.id)
    if loops:
        for n in ast.walk(loops[-1]):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                bound_before.add(n.id)
    # a returned name the block may leave unbound, and that is not bound before it, would raise in the helper
    certain = definitely_bound(block) if expr is None else set()
    if any(n not in bound_before and n not in certain for n in returns):
        return None
    # pass what the moved code reads before it binds it (a name it binds first is the helper's own)
    first_load: dict[str, tuple[int, int]] = {}
    first_store: dict[str, tuple[int, int]] = {}
    early: dict[int, tuple[int, int]] = {}  # a value (or loop iterable) is evaluated before its targets
    for st in moved:
        for n in ast.walk(st):
            if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign) and n.value is not None:
                for x in ast.walk(n.value):
                    early[id(x)] = (n.lineno, n.col_offset - 1)
            elif isinstance(n, ast.For):
                for x in ast.walk(n.iter):
                    early[id(x)] = (n.lineno, n.col_offset - 1)
    for st in moved:
        comp = _comp_bound(st)
        for n in ast.walk(st):
            if isinstance(n, ast.Name) and id(n) not in comp:
                where = first_load if isinstance(n.ctx, ast.Load) else first_store
                pos = early.get(id(n), (n.lineno, n.col_offset))
                if n.id not in where or pos < where[n.id]:
                    where[n.id] = pos
            elif isinstance(n, ast.Import | ast.ImportFrom):
                for a in n.names:
                    nm = (a.asname or a.name).split(".")[0]
                    if nm not in first_store or (n.lineno, n.col_offset) < first_store[nm]:
                        first_store[nm] = (n.lineno, n.col_offset)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                pos = (n.lineno, n.col_offset - 1)  # `x += 1` reads x first
                if n.target.id not in first_load or pos < first_load[n.target.id]:
                    first_load[n.target.id] = pos
    for n in ast.walk(region_root):
        if isinstance(n, ast.Import | ast.ImportFrom) and n.lineno < block[0].lineno:
            bound_before |= {(a.asname or a.name).split(".")[0] for a in n.names}
    args = [
        n
        for n in loaded
        if n != self_name
        and (n not in first_store or (first_load.get(n, (0, 0)) < first_store[n] and n in bound_before))
    ]
    args += [
        n
        for n in returns
        if n not in args and n not in certain and n in bound_before and n != self_name and fn is not None
    ]
    hoisted: list[tuple[str, str]] = []  # (param, expression text)
    edits_inner: list[tuple[int, int, str]] = []
    obj = None
    if style == "dict-param":
        bases = _dict_bases(moved, set(stored))
        if not bases:
            return None
        by_text: dict[str, str] = {}
        for b in bases:
            t = src.seg(b)
            if t not in by_text:
                by_text[t] = fresh("d")
                hoisted.append((by_text[t], t))
        for s in moved:
            for n in ast.walk(s):
                if isinstance(n, ast.Subscript | ast.Attribute) and src.seg(n) in by_text:
                    if isinstance(getattr(n, "ctx", None), ast.Load):
                        edits_inner.append((src.start(n), src.end(n), by_text[src.seg(n)]))
        edits_inner = _outermost(edits_inner)
    elif style == "function":
        obj = fresh("m")
        for s in moved:
            edits_inner += [
                (src.start(n), src.end(n), obj) for n in ast.walk(s) if isinstance(n, ast.Name) and n.id == self_name
            ]
        if not edits_inner:
            return None  # the statements do not use the model object: the same as `extract`
    name = fresh("_h")
    ind = src.indent(block[0].lineno)
    if expr is None:
        a0, a1 = src.line_start(block[0].lineno), src.line_end(block[-1].end_lineno)
    else:
        a0, a1 = src.start(expr), src.end(expr)
    body = src.text[a0:a1]
    if edits_inner:
        body = apply_edits(src.text, edits_inner)[a0 : a1 + sum(len(r) - (b - a) for a, b, r in edits_inner)]
        remaining = set()
        tmp = ast.parse(_dedent(body, ind) if expr is None else "(" + body + ")")
        for n in ast.walk(tmp):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                remaining.add(n.id)
        args = [a for a in args if a in remaining or a in returns]
    params = [p for p, _t in hoisted] + args
    call_args = [t for _p, t in hoisted] + args
    decorator = ""
    if style == "closure":
        hdr = ind
        call = f"{name}({', '.join(call_args)})"
    elif style == "function":
        hdr = ""
        params = [obj, *params]
        call = f"{name}({', '.join([self_name, *call_args])})"
    elif cls is not None:
        hdr = src.indent(fn.lineno)
        params = [self_name, *params]
        call = f"{self_name}.{name}({', '.join(call_args)})"
        if any(ast.unparse(d) == "classmethod" for d in fn.decorator_list):
            decorator = f"{hdr}@classmethod"
    else:
        hdr = ""
        call = f"{name}({', '.join(call_args)})"
    extra: list[tuple[int, int, str]] = []
    body_ind = hdr + "    "
    helper = [f"{hdr}def {name}({', '.join(params)}):"]
    if decorator:
        helper.insert(0, decorator)
    if expr is None:
        helper += [body_ind + line[len(ind) :] if line.startswith(ind) else line for line in body.split("\n")]
        if returns:
            helper.append(body_ind + "return " + ", ".join(returns))
        assign = ", ".join(returns) + " = " if returns else ""
        replacement = f"{ind}{assign}{call}"
    else:
        helper.append(body_ind + "return " + (f"({body})" if "\n" in body else body))
        replacement = call
        # the span's marker sits at the end of the statement's line: it moves with the expression
        held = [ln for ln in range(block[0].lineno, block[0].end_lineno + 1) if MARK in src.lines[ln - 1]]
        if held:
            helper[-1] += "  " + MARK
            # the statement's own line keeps its marker: the call that replaced the expression is there
    top = block[0]
    for p in src.parents(block[0]):
        if isinstance(p, ast.Module):
            break
        top = p
    if expr is None:
        replacement += "  " + MARK  # the span is its code's new place and the call that replaced it
    if style == "closure":
        if _is_elif(src, block[0]) or not _whole_lines(src, [block[0]]):
            return None  # nothing can be defined right before an `elif`
        at = src.line_start(block[0].lineno)
        return apply_edits(src.text, [(at, at, "\n".join(helper) + "\n"), (a0, a1, replacement), *extra])
    if fn is None:
        # module level: the helper goes before the top-level statement holding the block (it must exist
        # when the block runs)
        at = src.line_start(top.lineno)
        return apply_edits(src.text, [(at, at, "\n".join(helper) + "\n\n\n"), (a0, a1, replacement), *extra])
    insert_after = fn if (cls is not None and style != "function") else top
    at = src.line_end(insert_after.end_lineno)
    return apply_edits(src.text, [(a0, a1, replacement), (at, at, "\n\n" + "\n".join(helper)), *extra])


def _outermost(edits):
    edits = sorted(edits, key=lambda e: (e[0], -(e[1] - e[0])))
    out = []
    for e in edits:
        if out and e[0] < out[-1][1]:
            continue
        out.append(e)
    return out


def _dedent(body: str, ind: str) -> str:
    return "\n".join(line[len(ind) :] if line.startswith(ind) else line for line in body.split("\n"))


def extract(src, span, fresh):
    return _extract(src, span, fresh, "method")


def dict_param(src, span, fresh):
    return _extract(src, span, fresh, "dict-param")


def closure(src, span, fresh):
    return _extract(src, span, fresh, "closure")


def function(src, span, fresh):
    return _extract(src, span, fresh, "function")


# --- alias and temporaries ------------------------------------------------------------------------
def _is_elif(src: Source, stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and src.lines[stmt.lineno - 1].lstrip().startswith("elif")


def _header_exprs(stmt: ast.stmt) -> list[ast.AST] | None:
    if isinstance(stmt, ast.If):
        return [stmt.test]
    if isinstance(stmt, ast.For):
        return [stmt.iter]
    if isinstance(stmt, ast.With):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Expr | ast.Return | ast.Assert):
        return [stmt]
    return None


def alias(src: Source, span: tuple[int, int], fresh: Fresh) -> str | None:
    block = target_block(src, span)
    if not block:
        return None
    fn = enclosing_function(src, block[0])
    if fn is None:
        return None
    locs = _scope_locals(src, fn)
    cls = _method_class(src, fn)
    methods = {n.name for n in ast.walk(cls) if isinstance(n, FUNCS)} if cls is not None else set()
    edits = []
    for stmt in block:
        roots = _header_exprs(stmt)
        if not roots or _is_elif(src, stmt) or not _whole_lines(src, [stmt]):
            continue
        lines, seen = [], {}
        ind = src.indent(stmt.lineno)
        for root in roots:
            comp = _comp_bound(root)
            fstr = {id(x) for n in ast.walk(root) if isinstance(n, ast.JoinedStr) for x in ast.walk(n)}
            calls = {id(n.func) for n in ast.walk(root) if isinstance(n, ast.Call)}
            for n in ast.walk(root):
                if id(n) in fstr or id(n) in comp:
                    continue
                key = None
                if (
                    isinstance(n, ast.Name)
                    and isinstance(n.ctx, ast.Load)
                    and n.id in locs
                    and n.id not in ("self", "cls")
                ):
                    key = n.id
                elif (
                    isinstance(n, ast.Attribute)
                    and isinstance(n.ctx, ast.Load)
                    and isinstance(n.value, ast.Name)
                    and n.value.id == "self"
                    and n.attr not in methods
                    and id(n) not in calls
                ):
                    key = f"self.{n.attr}"
                if key is None:
                    continue
                if key not in seen:
                    seen[key] = fresh("a")
                    lines.append(f"{ind}{seen[key]} = {key}")
                edits.append((src.start(n), src.end(n), seen[key]))
        if lines:
            at = src.line_start(stmt.lineno)
            edits.append((at, at, "\n".join(lines) + "\n"))
    if not edits:
        return None
    return apply_edits(src.text, _outermost(edits))


def _unconditional_calls(expr: ast.AST) -> list[ast.Call]:
    """Calls in evaluation (completion) order, skipping parts evaluated only conditionally."""
    out: list[ast.Call] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, ast.Lambda | ast.JoinedStr):
            return
        if isinstance(n, ast.BoolOp):
            visit(n.values[0])
            return
        if isinstance(n, ast.IfExp):
            visit(n.test)
            return
        if isinstance(n, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            visit(n.generators[0].iter)
            return
        if isinstance(n, ast.NamedExpr):
            return
        for c in ast.iter_child_nodes(n):
            visit(c)
        if isinstance(n, ast.Call):
            out.append(n)

    visit(expr)
    return out


def temp(src: Source, span: tuple[int, int], fresh: Fresh) -> str | None:
    """Hoist the first call the statement completes into a temporary (or, without a nested call, the
    whole value: `t = X; return t`, `t = X; if t:`)."""
    block = target_block(src, span)
    if not block:
        return None
    for stmt in block:
        if _is_elif(src, stmt) or not _whole_lines(src, [stmt]):
            continue
        if isinstance(stmt, ast.If):
            root = stmt.test
        elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.Return | ast.Expr) and stmt.value:
            root = stmt.value
        else:
            continue
        calls = [c for c in _unconditional_calls(root) if c is not root]
        if calls:
            hoist = calls[0]
        elif isinstance(stmt, ast.Expr) and isinstance(root, ast.Call) and isinstance(root.func, ast.Attribute):
            hoist = root.func  # `t = obj.method; t(...)`: the bound method through a temporary
        elif not isinstance(stmt, ast.Expr) and not isinstance(root, ast.Name | ast.Constant):
            hoist = root
        else:
            continue
        name = fresh("t")
        ind = src.indent(stmt.lineno)
        text = src.seg(hoist)
        if "\n" in text:
            text = "(" + text + ")"
        at = src.line_start(stmt.lineno)
        return apply_edits(src.text, [(at, at, f"{ind}{name} = {text}\n"), (src.start(hoist), src.end(hoist), name)])
    return None


def import_form(src: Source, span: tuple[int, int], fresh: Fresh) -> str | None:
    """`import x` -> `x = importlib.import_module("x")`; `from m import n` -> `n = importlib.import_module("m").n`."""
    block = target_block(src, span)
    if not block:
        return None
    edits = []
    for st in block:
        nodes = (
            [st]
            if isinstance(st, ast.Import | ast.ImportFrom)
            else [n for n in ast.walk(st) if isinstance(n, ast.Import | ast.ImportFrom)]
        )
        for n in nodes:
            if not _whole_lines(src, [n]) or (isinstance(n, ast.ImportFrom) and (n.level or n.module is None)):
                continue
            ind = src.indent(n.lineno)
            lines = []
            for a in n.names:
                if a.name == "*":
                    break
                if isinstance(n, ast.Import):
                    local = a.asname or a.name.split(".")[0]
                    mod = a.name if a.asname else a.name.split(".")[0]
                    if not a.asname and "." in a.name:
                        lines.append(f'{ind}importlib.import_module("{a.name}")')
                    lines.append(f'{ind}{local} = importlib.import_module("{mod}")')
                else:
                    lines.append(f'{ind}{a.asname or a.name} = importlib.import_module("{n.module}").{a.name}')
            else:
                tail = src.text[src.end(n) : src.line_end(n.end_lineno)]
                edits.append((src.line_start(n.lineno), src.line_end(n.end_lineno), "\n".join(lines) + tail))
    if not edits:
        return None
    first = src.tree.body[0] if src.tree.body else None
    at = 0
    if first is not None and isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        at = src.line_end(first.end_lineno) + 1  # after the module docstring
    for st in src.tree.body:
        if isinstance(st, ast.ImportFrom) and st.module == "__future__":
            at = src.line_end(st.end_lineno) + 1
    edits.append((at, at, "import importlib\n"))
    return apply_edits(src.text, edits)


# --- loops -----------------------------------------------------------------------------------------
def _enclosing_for(src: Source, span: tuple[int, int]) -> ast.For | None:
    block = target_block(src, span)
    if not block:
        return None
    cands = [block[0], *src.parents(block[0])]
    for n in cands:
        if isinstance(n, FUNCS + (ast.ClassDef, ast.Module)):
            return None
        if isinstance(n, ast.For) and n.body[0].lineno > n.iter.end_lineno:
            return n
    return None


def _loop_rewrite(src: Source, span: tuple[int, int], fresh: Fresh, style: str) -> str | None:
    loop = _enclosing_for(src, span)
    if loop is None or not _whole_lines(src, [loop]) or _is_elif(src, loop):
        return None
    ind = src.indent(loop.lineno)
    body_ind = src.indent(loop.body[0].lineno)
    if len(body_ind) <= len(ind):
        return None
    it = src.seg(loop.iter)
    if "\n" in it:
        it = "(" + it + ")"
    target = src.seg(loop.target)
    seq, idx = fresh("s"), fresh("i")
    is_range = isinstance(loop.iter, ast.Call) and ast.unparse(loop.iter.func) == "range"
    seq_value = it if is_range else f"list({it})"
    colon_line = loop.iter.end_lineno
    tail = src.text[src.end(loop.iter) : src.line_end(colon_line)]
    m = re.match(r"\s*\)*\s*:", tail)
    if not m:
        return None
    comment = tail[m.end() :]
    start = src.line_start(loop.lineno)
    end = src.line_end(colon_line)
    if style == "index":
        head = [
            f"{ind}{seq} = {seq_value}",
            f"{ind}for {idx} in range(len({seq})):{comment}",
            f"{body_ind}{target} = {seq}[{idx}]",
        ]
    else:
        head = [
            f"{ind}{seq} = {seq_value}",
            f"{ind}{idx} = 0",
            f"{ind}while {idx} < len({seq}):{comment}",
            f"{body_ind}{target} = {seq}[{idx}]",
            f"{body_ind}{idx} += 1",
        ]
    return apply_edits(src.text, [(start, end, "\n".join(head))])


def loop_index(src, span, fresh):
    return _loop_rewrite(src, span, fresh, "index")


def loop_while(src, span, fresh):
    return _loop_rewrite(src, span, fresh, "while")


# --- move (consumers) ------------------------------------------------------------------------------
def moved_path(path: str) -> str | None:
    parts = path.split("/")
    stem = parts[-1][:-3]
    owner = parts[-2] if len(parts) > 1 else "x"
    if path.startswith("examples/"):
        return f"tests/e2e/offline_inference/test_{owner}_{stem.removeprefix('test_')}.py"
    if path.startswith("tests/"):
        return f"benchmarks/{owner}/bench_{stem.removeprefix('test_')}.py"
    if path.startswith("benchmarks/"):
        return f"examples/offline_inference/text_to_speech/{owner}/{stem}.py"
    if "/entrypoints/" in path:
        return f"benchmarks/serving/{stem}.py"
    return None


# --- driver ----------------------------------------------------------------------------------------
Transform = Callable[[Source, tuple[int, int], Fresh], "str | None"]
TRANSFORMS: dict[str, Transform] = {
    "rename": rename,
    "extract": extract,
    "dict-param": dict_param,
    "closure": closure,
    "function": function,
    "alias": alias,
    "temp": temp,
    "import-form": import_form,
    "loop-index": loop_index,
    "loop-while": loop_while,
}
ALL = (*TRANSFORMS, "move")


def variant(text: str, path: str, span: tuple[int, int], name: str, consumer: bool) -> Variant | None:
    """One rewrite of ``text`` around ``span`` (None when it does not apply)."""
    if name == "move":
        new_path = moved_path(path) if consumer else None
        return Variant(name, text, new_path, (span,)) if new_path else None
    marked = mark(text, span)
    if marked is None:
        return None
    src = Source(marked)
    fresh = Fresh(src.names())
    out = TRANSFORMS[name](src, span, fresh)
    if out is None or out == marked:
        return None
    try:
        ast.parse(out)
    except SyntaxError as exc:
        raise RewriteError(f"{name} on {path}:{span[0]}-{span[1]} does not parse: {exc}") from exc
    back = unmark(out)
    if back is None:
        raise RewriteError(f"{name} on {path}:{span[0]}-{span[1]} lost the span marker")
    new_text, new_span = back
    return Variant(name, new_text, path, new_span)


def variants(text: str, path: str, span: tuple[int, int], consumer: bool) -> list[Variant]:
    out = []
    for name in ALL:
        v = variant(text, path, span, name, consumer)
        if v is not None:
            out.append(v)
    return out
