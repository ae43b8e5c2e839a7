"""I2 — consumers of multimodal outputs (tests, examples, benchmarks, and the tree's own serving
entrypoints): never take the truth value of an output tensor, and always handle the list-of-chunks
form."""

from __future__ import annotations

import ast

from omnitts.validators.static.index import FUNC_TYPES, dotted, walk
from omnitts.validators.static.rule import CODE, CONSUMER, CONSUMER_PATH, Invalid, Rule, Valid, register
from omnitts.validators.static.source import SourceFile

# The engine's request output (`OmniRequestOutput` / `CompletionOutput.multimodal_output`): what consumers read,
# a Tensor or a list of chunks. `OmniOutput.multimodal_outputs` (plural) is the model's own per-step output, a list
# per request by contract: a unit test of a model's forward indexes it legitimately.
MM_ATTRS = frozenset({"multimodal_output"})
# The serving layer (`vllm_omni/entrypoints/...`: speech, chat, audio servers) consumes engine
# outputs exactly as an example does.
SERVING_DIR = "entrypoints/"
SERVING_PATH = "vllm_omni/entrypoints/openai/serving_demo.py"


def _is_consumer(src: SourceFile) -> bool:
    return src.kind == CONSUMER or (src.kind == CODE and SERVING_DIR in src.rel)


SCALAR_KEYS = frozenset({"sr", "sample_rate", "audio_sample_rate", "sampling_rate"})
TENSOR_ATTRS = frozenset(
    "cpu numpy shape squeeze unsqueeze float double half detach to dim ndim numel size tolist flatten view reshape "
    "dtype device contiguous abs max min mean clamp T".split()
)
LIST_HANDLERS = (
    "cat",
    "concatenate",
    "concat",
    "stack",
    "hstack",
    "flatten",
    "merge",
    "join",
    "as_tensor",
    "to_tensor",
    "normalize",
    "coerce",
    "_to_",
    "collect",
)


DICT = "<dict>"  # the fact "a multimodal output dict" (a value's fact is the key it was read under)
# The engine's own key for a stage's audio (OmniOutput.multimodal_outputs["model_outputs"]): a dict read
# under it in a consumer is a multimodal output dict, whatever the name it arrives under.
ENGINE_KEYS = frozenset({"model_outputs"})


class _Scope:
    """Multimodal dicts and values bound in one function (or the module body): from `.multimodal_output`,
    from what callers pass in (``params``), from what in-file helpers return (``flow``), through
    assignments and aliases; a name read under the engine's own output key is a dict too."""

    def __init__(self, body_nodes: list[ast.AST], params: dict[str, str] | None = None, flow=None, fn=None) -> None:
        self.flow = flow
        self.fn = fn
        self.dicts: set[str] = {p for p, f in (params or {}).items() if f == DICT}
        self.values: dict[str, str] = {p: f for p, f in (params or {}).items() if f != DICT}  # name -> key
        for n in body_nodes:
            key = None
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name):
                key = n.slice
            elif (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in ("get", "pop")
                and isinstance(n.func.value, ast.Name)
                and n.args
            ):
                key = n.args[0]
            if isinstance(key, ast.Constant) and key.value in ENGINE_KEYS:
                base = n.value if isinstance(n, ast.Subscript) else n.func.value
                self.dicts.add(base.id)
        assigns = [n for n in body_nodes if isinstance(n, ast.Assign | ast.AnnAssign | ast.NamedExpr)]
        assigns.sort(key=lambda n: (n.lineno, n.col_offset))
        self.checks: dict[str, frozenset[str]] = {}  # name -> the names whose isinstance check it holds
        for n in assigns:
            if n.value is not None and (checked := _isinstance_names(n.value)):
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    if isinstance(t, ast.Name):
                        self.checks[t.id] = checked
        # plain copies of one name into another (aliases of the same object)
        self.copies = [
            (t.id, n.value.id)
            for n in assigns
            if isinstance(n.value, ast.Name)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        ]
        changed = True
        while changed:  # aliases of aliases, in any order
            changed = False
            for n in assigns:
                value = n.value
                if value is None:
                    continue
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if self.is_dict(value):
                    if not set(names) <= self.dicts:
                        self.dicts.update(names)
                        changed = True
                else:
                    key = self.value_key(value)
                    if key is not None:
                        for nm in names:
                            if nm not in self.values and nm not in self.dicts:
                                self.values[nm] = key
                                changed = True

    def same(self, names: frozenset[str]) -> frozenset[str]:
        """The names and every name that holds the same object (`a = audio`: checking `a` checks `audio`)."""
        out = set(names)
        changed = True
        while changed:
            changed = False
            for a, b in self.copies:
                if (a in out) != (b in out):
                    out |= {a, b}
                    changed = True
        return frozenset(out)

    def guards(self, test: ast.AST) -> frozenset[str]:
        """Names whose form a branch test checks: `isinstance(x, ...)` in it, or a name bound to such a check
        (`is_list = isinstance(audio, list)`), with their aliases."""
        names = set(_isinstance_names(test))
        for n in walk(test):
            if isinstance(n, ast.Name) and n.id in self.checks:
                names |= self.checks[n.id]
        return self.same(frozenset(names))

    def fact(self, node: ast.AST) -> str | None:
        if self.is_dict(node):
            return DICT
        return self.value_key(node)

    def _returned(self, node: ast.AST) -> str | None:
        if self.flow is None or not isinstance(node, ast.Call):
            return None
        target = self.flow.resolve(self.fn, node)
        return self.flow.returns.get(id(target)) if target is not None else None

    def is_dict(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in MM_ATTRS:
            return True
        if isinstance(node, ast.Name) and node.id in self.dicts:
            return True
        if isinstance(node, ast.BoolOp):
            return self.is_dict(node.values[0])
        if isinstance(node, ast.IfExp):
            return self.is_dict(node.body) or self.is_dict(node.orelse)
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                return node.args[1].value in MM_ATTRS
            if name == "dict" and node.args:
                return self.is_dict(node.args[0])
            if isinstance(node.func, ast.Attribute) and node.func.attr == "copy" and not node.args:
                return self.is_dict(node.func.value)
            return self._returned(node) == DICT
        return False

    def value_key(self, node: ast.AST) -> str | None:
        """The output key an expression reads, if it is a multimodal output value."""
        if isinstance(node, ast.Subscript) and self.is_dict(node.value):
            s = node.slice
            return s.value if isinstance(s, ast.Constant) and isinstance(s.value, str) else "?"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop"):
            if self.is_dict(node.func.value) and node.args:
                a = node.args[0]
                return a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else "?"
        if isinstance(node, ast.Name) and node.id in self.values:
            return self.values[node.id]
        if isinstance(node, ast.BoolOp):
            keys = [self.value_key(v) for v in node.values]
            return next((k for k in keys if k is not None), None)
        if isinstance(node, ast.IfExp):
            return self.value_key(node.body) or self.value_key(node.orelse)
        if isinstance(node, ast.Call):
            f = self._returned(node)
            return f if f not in (None, DICT) else None
        return None


class OutputFlow:
    """The file's multimodal output facts, across its functions: a parameter is a dict (or a value read
    under a key) when some in-file call passes one, a call is one when the function returns one. A
    fixpoint over the file's calls (context-free: what any caller passes); cached on the source file."""

    ROUNDS = 4

    def __init__(self, tree: ast.Module) -> None:
        self.scopes_nodes = list(_scopes(tree))
        self.module_funcs = {n.name: n for n in tree.body if isinstance(n, FUNC_TYPES)}
        self.methods: dict[int, dict[str, ast.AST]] = {}  # id(class) -> name -> def
        self.parent_class: dict[int, ast.ClassDef] = {}
        self.nested: dict[int, dict[str, ast.AST]] = {}  # id(function) -> its nested defs by name
        for node in walk(tree):
            if isinstance(node, ast.ClassDef):
                self.methods[id(node)] = {b.name: b for b in node.body if isinstance(b, FUNC_TYPES)}
                for b in node.body:
                    if isinstance(b, FUNC_TYPES):
                        self.parent_class[id(b)] = node
            elif isinstance(node, FUNC_TYPES):
                self.nested[id(node)] = {b.name: b for b in walk_body(node) if isinstance(b, FUNC_TYPES)}
        self.enclosing: dict[int, ast.AST] = {}
        for node in walk(tree):
            if isinstance(node, FUNC_TYPES):
                for inner in self.nested[id(node)].values():
                    self.enclosing[id(inner)] = node
        self.params: dict[int, dict[str, str]] = {}
        self.returns: dict[int, str] = {}
        self.scope: dict[int, _Scope] = {}
        for _ in range(self.ROUNDS):
            changed = False
            for fn, nodes in self.scopes_nodes:
                sc = _Scope(nodes, self.params.get(id(fn)), self, fn)
                self.scope[id(fn)] = sc
                for n in nodes:
                    if isinstance(n, ast.Return) and n.value is not None and id(fn) not in self.returns:
                        f = sc.fact(n.value)
                        returned = {x.id for x in walk(n.value) if isinstance(x, ast.Name)}
                        if f is not None and not (f != DICT and _handles_list(nodes, returned, None, None)):
                            # a helper that checks the form of what it returns hands back a normalised value
                            self.returns[id(fn)] = f
                            changed = True
                    elif isinstance(n, ast.Call):
                        changed |= self._bind(sc, fn, n)
            if not changed:
                break

    def resolve(self, fn: ast.AST, call: ast.Call) -> ast.AST | None:
        func = call.func
        if isinstance(func, ast.Name):
            scope = fn
            while scope is not None and isinstance(scope, FUNC_TYPES):
                hit = self.nested.get(id(scope), {}).get(func.id)
                if hit is not None:
                    return hit
                scope = self.enclosing.get(id(scope))
            return self.module_funcs.get(func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
            cls = self.parent_class.get(id(fn))
            if cls is None:
                outer = self.enclosing.get(id(fn))
                cls = self.parent_class.get(id(outer)) if outer is not None else None
            return self.methods.get(id(cls), {}).get(func.attr) if cls is not None else None
        return None

    def _bind(self, sc: _Scope, fn: ast.AST, call: ast.Call) -> bool:
        target = self.resolve(fn, call)
        if target is None:
            return False
        params = [a.arg for a in [*target.args.posonlyargs, *target.args.args]]
        if isinstance(call.func, ast.Attribute) and params[:1] in (["self"], ["cls"]):
            params = params[1:]
        pairs = [(p, a) for p, a in zip(params, call.args, strict=False) if not isinstance(a, ast.Starred)]
        names = set(params) | {a.arg for a in target.args.kwonlyargs}
        pairs += [(k.arg, k.value) for k in call.keywords if k.arg in names]
        changed = False
        slot = self.params.setdefault(id(target), {})
        for p, a in pairs:
            f = sc.fact(a)
            if f is not None and p not in slot:
                slot[p] = f
                changed = True
        return changed

    def handles_list(self, fn_node: ast.AST, param_index: int) -> bool:
        """Whether an in-file function normalises its parameter's list-of-chunks form."""
        params = [a.arg for a in [*fn_node.args.posonlyargs, *fn_node.args.args]]
        if params[:1] in (["self"], ["cls"]):
            params = params[1:]
        if param_index >= len(params):
            return False
        nodes = [n for _f, ns in self.scopes_nodes if _f is fn_node for n in ns]
        return _handles_list(nodes, {params[param_index]}, None, None)


def _scopes(tree: ast.Module):
    """(scope node, its own nodes) for the module body and every function."""

    def own(root_body):
        stack, out = list(root_body), []
        while stack:
            n = stack.pop()
            out.append(n)
            for c in ast.iter_child_nodes(n):
                if not isinstance(c, FUNC_TYPES + (ast.ClassDef, ast.Lambda)):
                    stack.append(c)
        return out

    yield tree, own(tree.body)
    for fn in walk(tree):
        if isinstance(fn, FUNC_TYPES):
            yield fn, own(fn.body)


def walk_body(fn: ast.AST):
    """Nodes of a function body, nested function definitions included but not their bodies."""
    stack = list(fn.body)
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, FUNC_TYPES + (ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(n))


def output_flow(src: SourceFile) -> OutputFlow:
    cached = src.__dict__.get("_i2_flow")
    if cached is None:
        cached = src.__dict__["_i2_flow"] = OutputFlow(src.tree)
    return cached


def _truth_tests(nodes: list[ast.AST]):
    """Expressions whose truth value Python evaluates."""
    for n in nodes:
        if isinstance(n, ast.If | ast.While | ast.IfExp | ast.Assert):
            yield n.test
        elif isinstance(n, ast.comprehension):
            yield from n.ifs
        elif isinstance(n, ast.BoolOp):
            yield from n.values[:-1]
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            yield n.operand
        elif isinstance(n, ast.Call) and dotted(n.func) == "bool" and len(n.args) == 1:
            yield n.args[0]


_EX = """
import torch
from vllm_omni import Omni


def main(omni, inputs):
    for out in omni.generate(inputs):
        mm = out.outputs[0].multimodal_output
{body}
"""


def _ex(body: str) -> str:
    return _EX.format(body="\n".join("        " + line for line in body.strip().splitlines()))


@register
class NoTensorTruthiness(Rule):
    """Truthiness of a multimodal output value in a test, example, benchmark or serving entrypoint: `mm.get("audio") or
    mm.get("model_outputs")`, `if audio:`, `not audio`, `assert audio`.

    Why: the value is a tensor (or a list of tensors); Python's truth test on a tensor with more
    than one element raises `RuntimeError: Boolean value of Tensor with more than one value is
    ambiguous`, and on a one-element tensor silently tests its value.

    Fix: use explicit `is None` chains (`audio = mm.get("audio"); if audio is None: audio =
    mm.get("model_outputs")`) and assert shape/dtype/duration instead of presence.
    """

    id = "OMNI-I2-001"
    name = "no-tensor-truthiness"
    invariant = "I2"
    severity = "error"
    kinds = frozenset({CONSUMER, CODE})
    needles = ("multimodal_output", "model_outputs")
    VALID = [
        Valid(
            _ex("""audio = mm.get("audio")
if audio is None:
    audio = mm.get("model_outputs")
assert audio is not None"""),
            path=CONSUMER_PATH,
        ),
        Valid(
            _ex("""if mm and "audio" in mm:
    print(len(mm["audio"]))"""),
            path=CONSUMER_PATH,
            note="the dict itself may be tested",
        ),
    ]
    INVALID = [
        Invalid(
            _ex("""audio = mm.get("audio") or mm.get("model_outputs")"""),
            path=CONSUMER_PATH,
            line=9,
            message="truth value",
        ),
        Invalid(
            _ex('''audio = mm["audio"]
assert audio, "no audio"'''),
            path=CONSUMER_PATH,
            line=10,
            message="truth value",
        ),
    ]

    def check(self, src: SourceFile):
        if not _is_consumer(src):
            return
        seen = set()
        flow = output_flow(src)
        for scope, nodes in flow.scopes_nodes:
            sc = flow.scope[id(scope)]
            for test in _truth_tests(nodes):
                key = sc.value_key(test)
                if key is None or key in SCALAR_KEYS or id(test) in seen:
                    continue
                if isinstance(test, ast.BoolOp):
                    continue  # its operands are checked one by one
                seen.add(id(test))
                yield Rule.at(
                    test,
                    f"truth value of multimodal output `{key}` (a tensor or list of tensors): raises "
                    "'Boolean value of Tensor ... is ambiguous'; test `is None` instead",
                )


def _handles_list(nodes: list[ast.AST], names: set[str], flow: OutputFlow | None, fn: ast.AST | None) -> bool:
    """The function checks the form (`isinstance(x, list/tuple/Tensor)`) or hands the value to something that
    normalises it: a concatenation, or an in-file helper that does one of these with its parameter."""
    for n in nodes:
        if isinstance(n, ast.Call):
            if flow is not None and fn is not None:
                target = flow.resolve(fn, n)
                if target is not None and target is not fn:
                    for i, a in enumerate(n.args):
                        if any(isinstance(x, ast.Name) and x.id in names for x in walk(a)) and flow.handles_list(
                            target, i
                        ):
                            return True
            fname = dotted(n.func)
            if fname == "isinstance" and len(n.args) == 2:
                types = ast.unparse(n.args[1])
                if "list" in types or "tuple" in types or "Sequence" in types:
                    return True
                # `assert isinstance(audio, torch.Tensor)`: the form is checked explicitly
                if any(isinstance(x, ast.Name) and x.id in names for x in walk(n.args[0])):
                    return True
            last = fname.split(".")[-1]
            if any(h in last for h in LIST_HANDLERS):
                for a in n.args:
                    if any(isinstance(x, ast.Name) and x.id in names for x in walk(a)):
                        return True
    return False


# The serving layer consumes engine outputs too (streaming chat audio: the last chunk of a list).
_SERVE = """
import torch


def stream_audio(res, stream):
    audio = res.outputs[0].multimodal_output.get("audio")
    if stream:
        last = {pick}
    else:
        last = torch.cat(audio, dim=-1) if isinstance(audio, list) else audio
    return last.float().cpu().numpy()
"""


@register
class HandleListForm(Rule):
    """A test, example, benchmark or serving entrypoint (`vllm_omni/entrypoints/...`) that uses a
    multimodal output value as a tensor (`.cpu()`, `.numpy()`, `.shape`, `torch.*`/`np.*`/
    `sf.write(...)`) without handling the list-of-chunks form anywhere in the function, or that takes
    one chunk (`audio[-1]`) on a path no `isinstance(audio, list)` check guards.

    Why: `multimodal_output[key]` is a `Tensor`, a `list[Tensor]` (pre-consolidation snapshot,
    streaming, and every 0.14-0.18 release for `audio`), an `np.ndarray` or a scalar. Code written
    against one form crashes or keeps only one chunk on another.

    Fix: normalise first: `if isinstance(x, list): x = torch.cat([t.reshape(-1) for t in x], dim=0)`
    (or call a helper that does), then assert shape/dtype/duration.
    """

    id = "OMNI-I2-002"
    name = "handle-list-form"
    invariant = "I2"
    severity = "error"
    kinds = frozenset({CONSUMER, CODE})
    needles = ("multimodal_output", "model_outputs")
    VALID = [
        Valid(
            _ex("""audio = mm["audio"]
if isinstance(audio, list):
    audio = torch.cat([t.reshape(-1) for t in audio], dim=0)
print(audio.shape)"""),
            path=CONSUMER_PATH,
        ),
        Valid(
            _ex("""audio = _concat_chunks(mm["audio"])
print(audio.shape)"""),
            path=CONSUMER_PATH,
            note="a helper normalises it",
        ),
        Valid(_SERVE.format(pick="audio[-1] if isinstance(audio, list) else audio"), path=SERVING_PATH),
    ]
    INVALID = [
        Invalid(
            _ex("""audio = mm["audio"]
wav = audio.float().cpu().numpy()"""),
            path=CONSUMER_PATH,
            line=10,
            message="list-of-chunks",
        ),
        Invalid(
            _ex("""wav = torch.cat(mm["audio"])"""), path=CONSUMER_PATH, line=9, message="consolidated Tensor breaks it"
        ),
        Invalid(_SERVE.format(pick="audio[-1]"), path=SERVING_PATH, line=8, message="takes one chunk"),
    ]

    def check(self, src: SourceFile):
        if not _is_consumer(src):
            return
        flow = output_flow(src)
        for scope, nodes in flow.scopes_nodes:
            if scope is src.tree:
                continue
            sc = flow.scope[id(scope)]
            yield from _unguarded_chunk_index(scope, sc)
            # A direct `torch.cat(mm["audio"])` handles only the list form: checked below like a tensor use.
            names = {n for n, k in sc.values.items() if k not in SCALAR_KEYS}
            if not names and not any(sc.value_key(n) for n in nodes if isinstance(n, ast.Subscript | ast.Call)):
                continue
            first = None
            for n in sorted((n for n in nodes if hasattr(n, "lineno")), key=lambda n: (n.lineno, n.col_offset)):
                if isinstance(n, ast.Attribute) and n.attr in TENSOR_ATTRS:
                    key = sc.value_key(n.value)
                elif isinstance(n, ast.Call) and dotted(n.func).split(".")[0] in (
                    "torch",
                    "np",
                    "numpy",
                    "sf",
                    "soundfile",
                    "torchaudio",
                    "scipy",
                    "librosa",
                ):
                    key = next((k for a in n.args if (k := sc.value_key(a)) is not None), None)
                else:
                    continue
                if key is not None and key not in SCALAR_KEYS:
                    first = (n, key)
                    break
            if first is None or _handles_list(nodes, names | {"__none__"}, flow, scope):
                continue
            node, key = first
            if isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] in (
                "cat",
                "concatenate",
                "stack",
                "hstack",
            ):
                yield Rule.at(
                    node,
                    f"multimodal output `{key}` is concatenated as a list of chunks without an "
                    "`isinstance` check: a consolidated Tensor breaks it (handle both forms)",
                )
                continue
            yield Rule.at(
                node,
                f"multimodal output `{key}` used as a tensor without handling its list-of-chunks form "
                "(`isinstance(x, list)` -> `torch.cat(...)`)",
            )


def _unguarded_chunk_index(scope: ast.AST, sc: _Scope):
    """`audio[-1]` / `audio[0]` (taking one chunk of the list form) on a branch no
    `isinstance(audio, list)` test guards: on a consolidated tensor it silently takes one sample
    (or one row). Branch-sensitive, unlike the function-wide check above."""
    out = []

    def visit(stmts: list[ast.stmt], guarded: frozenset[str]) -> None:
        for s in stmts:
            if isinstance(s, FUNC_TYPES + (ast.ClassDef,)):
                continue
            if isinstance(s, ast.If):
                names = sc.guards(s.test)
                _scan(s.test, guarded)
                visit(s.body, guarded | names)
                visit(s.orelse, guarded | names)
                continue
            for e in _stmt_roots(s):
                _scan(e, guarded)
            for block in _child_bodies(s):
                visit(block, guarded)

    def _scan(expr: ast.AST, guarded: frozenset[str]) -> None:
        for n in walk(expr):
            if isinstance(n, ast.IfExp):
                guarded = guarded | sc.guards(n.test)
        for n in walk(expr):
            if (
                isinstance(n, ast.Subscript)
                and isinstance(n.value, ast.Name)
                and n.value.id not in guarded
                and _int_index(n.slice)
            ):
                key = sc.values.get(n.value.id)
                if key is not None and key not in SCALAR_KEYS:
                    out.append(
                        Rule.at(
                            n,
                            f"`{n.value.id}{ast.unparse(n.slice).join('[]')}` takes one chunk of multimodal output "
                            f"`{key}` with no `isinstance(..., list)` check on this path: on a consolidated "
                            "tensor it takes one sample (handle both forms)",
                        )
                    )

    body = scope.body if isinstance(scope, FUNC_TYPES) else []
    visit(body, frozenset())
    yield from out


def _isinstance_names(test: ast.AST) -> frozenset[str]:
    return frozenset(
        n.args[0].id
        for n in walk(test)
        if isinstance(n, ast.Call) and dotted(n.func) == "isinstance" and n.args and isinstance(n.args[0], ast.Name)
    )


def _int_index(s: ast.AST) -> bool:
    if isinstance(s, ast.UnaryOp) and isinstance(s.op, ast.USub):
        s = s.operand
    return isinstance(s, ast.Constant) and isinstance(s.value, int) and not isinstance(s.value, bool)


def _stmt_roots(s: ast.stmt) -> list[ast.AST]:
    if isinstance(s, ast.For | ast.AsyncFor):
        return [s.iter]
    if isinstance(s, ast.While):
        return [s.test]
    if isinstance(s, ast.With | ast.AsyncWith):
        return [i.context_expr for i in s.items]
    if isinstance(s, ast.Try) or (hasattr(ast, "TryStar") and isinstance(s, ast.TryStar)):
        return []
    return [s]


def _child_bodies(s: ast.stmt) -> list[list[ast.stmt]]:
    out = []
    for field in ("body", "orelse", "finalbody"):
        block = getattr(s, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt) and not isinstance(s, ast.If):
            out.append(block)
    for h in getattr(s, "handlers", []) or []:
        out.append(h.body)
    return out
