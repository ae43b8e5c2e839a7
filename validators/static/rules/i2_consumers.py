"""I2 — consumers of multimodal outputs (tests, examples, benchmarks, and the tree's own serving
entrypoints): never take the truth value of an output tensor, and always handle the list-of-chunks
form."""

from __future__ import annotations

import ast

from omnitts.validators.static.index import FUNC_TYPES, dotted, walk
from omnitts.validators.static.rule import CODE, CONSUMER, CONSUMER_PATH, Invalid, Rule, Valid, register
from omnitts.validators.static.source import SourceFile

MM_ATTRS = frozenset({"multimodal_output", "multimodal_outputs"})
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


class _Scope:
    """Multimodal dicts and values bound in one function (or the module body)."""

    def __init__(self, body_nodes: list[ast.AST]) -> None:
        self.dicts: set[str] = set()
        self.values: dict[str, str] = {}  # name -> key it came from
        assigns = [n for n in body_nodes if isinstance(n, ast.Assign | ast.AnnAssign | ast.NamedExpr)]
        for _ in range(2):  # aliases of aliases
            for n in assigns:
                value = n.value
                if value is None:
                    continue
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if self.is_dict(value):
                    self.dicts.update(names)
                else:
                    key = self.value_key(value)
                    if key is not None:
                        for nm in names:
                            self.values[nm] = key

    def is_dict(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr in MM_ATTRS:
            return True
        if isinstance(node, ast.Name) and node.id in self.dicts:
            return True
        if isinstance(node, ast.BoolOp):
            return self.is_dict(node.values[0])
        return False

    def value_key(self, node: ast.AST) -> str | None:
        """The output key an expression reads, if it is a multimodal output value."""
        if isinstance(node, ast.Subscript) and self.is_dict(node.value):
            s = node.slice
            return s.value if isinstance(s, ast.Constant) and isinstance(s.value, str) else "?"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
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
        return None


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
    needles = ("multimodal_output",)
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
        for _scope, nodes in _scopes(src.tree):
            sc = _Scope(nodes)
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


def _handles_list(nodes: list[ast.AST], names: set[str]) -> bool:
    for n in nodes:
        if isinstance(n, ast.Call):
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
    needles = ("multimodal_output",)
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
        for scope, nodes in _scopes(src.tree):
            if scope is src.tree:
                continue
            sc = _Scope(nodes)
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
            if first is None or _handles_list(nodes, names | {"__none__"}):
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
                names = _isinstance_names(s.test)
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
                guarded = guarded | _isinstance_names(n.test)
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
