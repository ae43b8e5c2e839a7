"""A small flow-sensitive guess of what each value is: an accelerator tensor, a CPU tensor, a NumPy
array, or a plain Python value — enough to tell a host sync from a host-side computation.

Kinds: ``dev`` (torch tensor, device not known to be the CPU), ``cpu`` (torch tensor known on the
CPU), ``copy`` (a CPU tensor this step copied off the device), ``nd`` (NumPy), ``py`` (Python value),
``info`` (a per-request payload from the runner), ``smeta`` (vLLM's SamplingMetadata, whose fields
are device tensors), ``unk``. ``host`` joins cpu/copy/nd/py. Factories without ``device=`` inside
forward create CPU tensors; tensors created in ``__init__`` follow the module.

What a value is follows the data, not its name: assignments and aliases, dict values stored under a
constant key (``d = {"codes": t}``, ``d["codes"] = t``, then ``d["codes"]``/``d.get("codes")``), the
parameters of the runner hooks (the knowledge layer's ``per_step_hooks``: device arguments, the
per-request lists, SamplingMetadata), call-site arguments of in-file helpers, and what in-file
functions return. Names only help for attributes of objects this file does not define (vLLM's
``input_batch.num_tokens_cpu``) and for the runner's own keyword names.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from omnitts.validators.static.index import (
    FUNC_TYPES,
    ClassInfo,
    Ctx,
    ModuleIndex,
    dotted,
    is_graph_capture,
    is_run_once_test,
    is_self_attr,
    stmt_exprs,
    walk_expr,
)

DEV, CPU, ND, PY, UNK, HOST, INFO = "dev", "cpu", "nd", "py", "unk", "host", "info"
COPY, SMETA = "copy", "smeta"
# INFO: a per-request dict/list from the runner (runtime_additional_information, **kwargs of a hook)
# or anything read out of one; the runner keeps those payloads on the CPU ("additional_information_cpu").
HOST_KINDS = frozenset({CPU, COPY, ND, PY, HOST, INFO})
# The runner's own keywords for per-request payloads (knowledge/runner.py: buffer_kwargs, req_infos).
INFO_NAMES = frozenset("runtime_additional_information model_intermediate_buffer additional_information".split())
SAMPLING_TENSORS = frozenset(
    "temperature top_p top_k min_p frequency_penalties presence_penalties repetition_penalties".split()
)
DICT_METHODS = frozenset("get pop setdefault items values keys copy".split())
TENSOR_KINDS = frozenset({DEV, CPU, COPY})

TORCH_MODULES = ("torch", "torch.nn.functional", "F", "torch.linalg", "torch.fft", "torch.special", "nn.functional")
TORCH_NON_TENSOR = frozenset(
    """is_tensor is_floating_point is_complex numel get_default_dtype device dtype Size finfo iinfo manual_seed
    is_grad_enabled compile no_grad inference_mode enable_grad set_grad_enabled get_rng_state set_rng_state
    is_inference_mode_enabled get_num_threads set_default_dtype promote_types result_type can_cast
    is_autocast_enabled autocast broadcast_shapes""".split()
)
FACTORIES = frozenset(
    """tensor as_tensor zeros ones empty full arange linspace logspace rand randn randint randperm eye
    zeros_like ones_like empty_like full_like rand_like randn_like randint_like from_numpy frombuffer
    empty_strided scalar_tensor""".split()
)
SIZE_METHODS = frozenset(
    "size numel dim element_size stride is_contiguous data_ptr get_device nelement storage_offset is_floating_point "
    "ndimension __len__ is_pinned".split()
)
SIZE_ATTRS = frozenset("shape ndim dtype device is_cuda requires_grad is_leaf layout itemsize nbytes".split())
TENSOR_METHODS = frozenset(
    """sum mean max min argmax argmin amax amin float half bfloat16 double long int bool short byte view reshape
    view_as reshape_as clone detach contiguous squeeze unsqueeze transpose permute flatten unflatten any all eq ne
    gt lt ge le abs exp log sqrt rsqrt pow softmax log_softmax cumsum cumprod index_select gather scatter
    masked_fill masked_select where expand expand_as repeat repeat_interleave narrow select split chunk unbind
    topk sort argsort flip roll t T mT clamp clamp_ clamp_min clamp_max type_as new_zeros new_ones new_empty
    new_full new_tensor add sub mul div neg sign round floor ceil trunc fmod remainder matmul bmm mm norm
    std var prod nonzero count_nonzero logical_and logical_or logical_not isnan isinf isfinite nan_to_num
    diff tril triu fill_ zero_ copy_ add_ mul_ sub_ div_ index_copy index_add index_fill unique
    __getitem__ isin sigmoid tanh relu""".split()
)
# Layers whose call returns a tensor like their input (self.proj(x)).
NN_LAYERS = frozenset(
    """Linear Embedding Conv1d Conv2d ConvTranspose1d LayerNorm RMSNorm GroupNorm Dropout Identity SiLU GELU ReLU
    Tanh Sigmoid ReplicatedLinear ColumnParallelLinear RowParallelLinear QKVParallelLinear MergedColumnParallelLinear
    VocabParallelEmbedding ParallelLMHead""".split()
)


_COMPS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


def join(a: str, b: str) -> str:
    if a == b:
        return a
    if {a, b} == {COPY, CPU}:
        return CPU
    if {a, b} == {INFO, PY}:
        return INFO  # `info = infos[i] if i < n else {}`
    if a in HOST_KINDS and b in HOST_KINDS:
        return HOST
    return UNK


def _is_cpu_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and node.value == "cpu":
        return True
    if isinstance(node, ast.Call) and dotted(node.func) in ("torch.device", "device") and node.args:
        return _is_cpu_literal(node.args[0])
    return False


def _is_dtype(node: ast.AST) -> bool:
    d = dotted(node)
    return (
        d.startswith("torch.")
        and d.split(".")[-1]
        in {
            "float32",
            "float16",
            "bfloat16",
            "float64",
            "float",
            "half",
            "double",
            "long",
            "int64",
            "int32",
            "int16",
            "int8",
            "uint8",
            "bool",
            "int",
            "complex64",
        }
        or d.endswith("dtype")
    )


def _annotation_kind(ann: ast.AST | None) -> str:
    if ann is None:
        return UNK
    # `x: torch.Tensor` / `n: int`: a dotted name unparses to itself (ast.unparse is the cost otherwise).
    text = dotted(ann) or ast.unparse(ann)
    if "SamplingMetadata" in text:
        return SMETA
    if "Tensor" in text and "list" not in text.lower() and "dict" not in text.lower() and "tuple" not in text.lower():
        return DEV
    words = set(re.findall(r"[A-Za-z_]\w*", text))
    if words and words <= {"int", "float", "bool", "str", "None", "Optional", "Union", "list", "tuple", "typing"}:
        return PY  # `default: int | None = None`
    return UNK


def name_hint(name: str) -> str | None:
    """What an attribute of an object this file does not define says it is (vLLM's `*_cpu` fields), or
    the runner's own payload keywords."""
    if name in INFO_NAMES:
        return INFO
    low = name.lower()
    if low.endswith("_cpu") or low.startswith("cpu_") or "_cpu_" in low or low.endswith("_np") or low.endswith("_host"):
        return HOST
    return None


def dict_key(node: ast.AST) -> str | None:
    """The environment slot of a dict value under a constant key: `d["k"]` / `d.get("k")` -> `d['k']`."""
    if isinstance(node, ast.Subscript):
        base, key = node.value, node.slice
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        base, key = node.func.value, node.args[0]
    else:
        return None
    if isinstance(base, ast.Name) and isinstance(key, ast.Constant) and isinstance(key.value, str):
        return f"{base.id}[{key.value!r}]"
    return None


_RETURNS = "_omni_return_kinds"
_RETURN_DEPTH = [0]


def return_kind(index: ModuleIndex, fn) -> str:
    """The join of what an in-file function returns (context-free: its parameters as the runner contract,
    annotations and defaults say), cached on the index; generators and recursion give ``unk``."""
    cache = index.__dict__.setdefault(_RETURNS, {})
    hit = cache.get(fn.qualname)
    if hit is not None:
        return hit
    if fn.is_generator or _RETURN_DEPTH[0] >= 3:
        return UNK
    cache[fn.qualname] = UNK  # recursion
    _RETURN_DEPTH[0] += 1
    try:
        walker = _ReturnWalker(index, fn.node, index.class_of(fn), False, None, fn)
        walker.silent = True
        walker.run()
        kinds = walker.kinds
    finally:
        _RETURN_DEPTH[0] -= 1
    out = kinds[0] if kinds else PY
    for k in kinds[1:]:
        out = join(out, k)
    cache[fn.qualname] = out
    return out


class KindEval:
    """Evaluates kinds of expressions under an environment (name -> kind)."""

    def __init__(self, index: ModuleIndex, cls: ClassInfo | None, fn_info=None) -> None:
        self.index = index
        self.cls = cls
        self.fn_info = fn_info  # the function being walked: resolves `self.m(...)` to its return kind
        self._attr_cache: dict[str, str] = {}

    def self_attr_kind(self, attr: str) -> str:
        hint = name_hint(attr)
        if hint:
            return hint
        if self.cls is None:
            return UNK
        if attr not in self._attr_cache:
            self._attr_cache[attr] = UNK  # cycles
            values = self.cls.attr_values.get(attr, [])
            kinds = set()
            for v in values:
                if isinstance(v, ast.Call) and dotted(v.func) == "self.register_buffer":
                    kinds.add(DEV)
                elif isinstance(v, ast.Call) and dotted(v.func).split(".")[-1] == "Parameter":
                    kinds.add(DEV)
                elif (
                    isinstance(v, ast.Call)
                    and dotted(v.func).startswith("torch.")
                    and dotted(v.func).split(".")[-1] in FACTORIES
                ):
                    # __init__ runs under vLLM's target-device context: module tensors live on the device.
                    k = self.kind({}, v)
                    kinds.add(CPU if k == CPU and any(_is_cpu_literal(kw.value) for kw in v.keywords) else DEV)
                elif isinstance(v, ast.Constant) and v.value is None:
                    continue
                else:
                    kinds.add(self.kind({}, v))
            out = UNK
            if kinds:
                out = kinds.pop()
                for k in kinds:
                    out = join(out, k)
            self._attr_cache[attr] = out
        return self._attr_cache[attr]

    def kind(self, env: dict[str, str], node: ast.AST | None) -> str:  # noqa: C901 - one dispatch table
        if node is None:
            return PY
        if isinstance(node, ast.Constant | ast.JoinedStr | ast.List | ast.Tuple | ast.Dict | ast.Set):
            return PY
        if isinstance(node, ast.ListComp | ast.GeneratorExp) and isinstance(node.elt, ast.Name):
            gen = node.generators[0]
            if isinstance(gen.target, ast.Name) and gen.target.id == node.elt.id and self.kind(env, gen.iter) == INFO:
                return INFO  # [info for info in infos if isinstance(info, dict)]
        if isinstance(node, ast.ListComp | ast.DictComp | ast.SetComp | ast.GeneratorExp | ast.Lambda):
            return PY
        if isinstance(node, ast.Name):
            known = env.get(node.id)
            if known is not None:
                return known
            return INFO if node.id in INFO_NAMES else UNK
        if isinstance(node, ast.Attribute):
            if node.attr in SIZE_ATTRS:
                return PY
            if node.attr in ("T", "mT", "data", "real", "imag"):
                return self.kind(env, node.value)
            attr = is_self_attr(node)
            if attr is not None:
                return self.self_attr_kind(attr)
            base = self.kind(env, node.value)
            if base == INFO:
                return INFO  # a field of a payload struct (to_struct(info).meta.x)
            if base == SMETA:
                # vLLM's SamplingMetadata keeps its per-request parameters on the device
                return DEV if node.attr in SAMPLING_TENSORS else UNK
            return name_hint(node.attr) or UNK
        if isinstance(node, ast.Subscript):
            key = dict_key(node)
            if key is not None:
                known = env.get(key)
                if known is not None:
                    return known
            base = self.kind(env, node.value)
            return base if base in (DEV, CPU, COPY, ND, INFO) else UNK
        if isinstance(node, ast.BinOp):
            return self._combine([self.kind(env, node.left), self.kind(env, node.right)])
        if isinstance(node, ast.UnaryOp):
            return PY if isinstance(node.op, ast.Not) else self.kind(env, node.operand)
        if isinstance(node, ast.Compare):
            if any(isinstance(op, ast.Is | ast.IsNot | ast.In | ast.NotIn) for op in node.ops):
                return PY
            return self._combine([self.kind(env, x) for x in [node.left, *node.comparators]])
        if isinstance(node, ast.BoolOp):
            out = self.kind(env, node.values[0])
            for v in node.values[1:]:
                out = join(out, self.kind(env, v))
            return out
        if isinstance(node, ast.IfExp):
            return join(self.kind(env, node.body), self.kind(env, node.orelse))
        if isinstance(node, ast.Call):
            return self._call_kind(env, node)
        if isinstance(node, ast.NamedExpr):
            return self.kind(env, node.value)
        return UNK

    @staticmethod
    def _combine(kinds: list[str]) -> str:
        if DEV in kinds:
            return DEV
        if UNK in kinds:
            return UNK
        if CPU in kinds:
            return CPU
        if ND in kinds:
            return ND
        return PY

    def _call_kind(self, env: dict[str, str], node: ast.Call) -> str:
        func = node.func
        name = dotted(func)
        if isinstance(func, ast.Name):
            if (
                func.id in ("list", "tuple", "dict", "sorted", "reversed", "enumerate", "zip", "iter")
                and node.args
                and any(self.kind(env, a) == INFO for a in node.args)
                and all(self.kind(env, a) in HOST_KINDS for a in node.args)
            ):
                return INFO  # the payload list, reordered or numbered: still host-side payloads
            if func.id in (
                "len",
                "int",
                "float",
                "bool",
                "str",
                "range",
                "isinstance",
                "round",
                "repr",
                "hash",
                "id",
                "list",
                "tuple",
                "dict",
                "set",
                "sorted",
                "enumerate",
                "zip",
                "min",
                "max",
                "sum",
                "abs",
                "any",
                "all",
            ):
                return PY
            kinds = [self.kind(env, a) for a in [*node.args, *(k.value for k in node.keywords)]]
            if INFO in kinds and all(k in HOST_KINDS for k in kinds):
                return INFO  # to_struct(info), _pick(info, "key"): host-side views of the payload
            return self._returns(node)
        if not isinstance(func, ast.Attribute):
            return UNK
        mod, _, fname = name.rpartition(".")
        if mod in TORCH_MODULES:
            if fname in TORCH_NON_TENSOR:
                return PY
            if fname in FACTORIES:
                return self._factory_kind(env, node, fname)
            args = [self.kind(env, a) for a in node.args] + [self.kind(env, k.value) for k in node.keywords]
            if DEV in args:
                return DEV
            if any(a in TENSOR_KINDS for a in args) and all(a in HOST_KINDS for a in args):
                return CPU
            return UNK
        if mod in ("np", "numpy"):
            return ND
        recv = func.value
        m = func.attr
        if m == "get" and (key := dict_key(node)) is not None and (known := env.get(key)) is not None:
            return known
        if m in DICT_METHODS and self.kind(env, recv) in (INFO, HOST):
            return INFO
        if m in ("item", "tolist"):
            return PY
        if m == "cpu":
            return CPU if self.kind(env, recv) in HOST_KINDS else COPY
        if m == "numpy":
            return ND
        if m == "cuda":
            return DEV
        if m == "to":
            args = list(node.args) + [k.value for k in node.keywords if k.arg in ("device", None)]
            if any(_is_cpu_literal(a) for a in args):
                return CPU if self.kind(env, recv) in HOST_KINDS else COPY
            if args and all(_is_dtype(a) for a in args) or (not args and node.keywords):
                return self.kind(env, recv)
            rk = self.kind(env, recv)
            return rk if rk in (ND, PY) else DEV
        if m in SIZE_METHODS:
            return PY
        if m in TENSOR_METHODS:
            rk = self.kind(env, recv)
            if rk in (DEV, CPU, COPY, ND):
                return rk
            return CPU if rk in (INFO, HOST) else UNK
        attr = is_self_attr(func)
        if attr is not None and self.cls is not None:
            cname = self.cls.attr_class.get(attr)
            if cname in NN_LAYERS:
                return DEV
        return self._returns(node)

    def _returns(self, call: ast.Call) -> str:
        """What an in-file function returns, when the call resolves to one."""
        if self.fn_info is None:
            return UNK
        target = self.index.resolve(self.fn_info, call)
        return return_kind(self.index, target) if target is not None else UNK

    def _factory_kind(self, env: dict[str, str], node: ast.Call, fname: str) -> str:
        device = next((k.value for k in node.keywords if k.arg == "device"), None)
        if device is not None:
            return CPU if _is_cpu_literal(device) else DEV
        if fname.endswith("_like") and node.args:
            return self.kind(env, node.args[0])
        if fname in ("as_tensor", "tensor") and node.args:
            k = self.kind(env, node.args[0])
            if k == DEV:
                return DEV
            if k == UNK and fname == "as_tensor":
                return UNK  # as_tensor keeps the device of a tensor argument
        return CPU


class FlowWalker:
    """Walks one function body in order, keeping an environment of kinds, and calls
    ``on_expr(node, env, ctx, in_comp)`` for every expression node evaluated. Loops are walked
    twice (so loop-carried kinds settle); subclasses de-duplicate their reports by node."""

    # Walkers that only act inside hot regions set this: statements outside loops are then not
    # walked, except for their calls (``on_cold_call``) and comprehensions (which are loops).
    cold_fast = False
    # Walkers whose callbacks can only act on a statement whose source matches this pattern set it (with
    # ``lines``): the expressions of any other simple statement without a comprehension are not walked
    # (the environment still follows every assignment).
    expr_needle: re.Pattern | None = None

    def __init__(
        self,
        index: ModuleIndex,
        fn_node: ast.AST,
        cls: ClassInfo | None,
        hot: bool,
        param_kinds: dict[str, str] | None = None,
        fn_info=None,
        lines: list[str] | None = None,
    ) -> None:
        self.fn_info = fn_info
        self.lines = lines
        self.eval = KindEval(index, cls, fn_info)
        self.fn = fn_node
        self.hot_body = hot  # the whole body runs per step (called from a hot loop)
        env: dict[str, str] = {}
        args = fn_node.args
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            env[a.arg] = _annotation_kind(a.annotation)
        if args.vararg is not None:
            env[args.vararg.arg] = PY
        if args.kwarg is not None:
            env[args.kwarg.arg] = INFO  # runner kwargs: per-request dicts and host-side metadata
        hook = index.hook(fn_info) if fn_info is not None else None
        if hook is not None:
            # What the runner passes (knowledge/runner.py): device tensors, SamplingMetadata, per-request lists.
            positional = [a.arg for a in [*args.posonlyargs, *args.args]]
            if fn_info.cls is not None and positional[:1] in (["self"], ["cls"]):
                positional = positional[1:]
            for i in hook.device_args:
                if i < len(positional) and env[positional[i]] == UNK:
                    env[positional[i]] = DEV
            for where in hook.sampling:
                name = positional[where] if isinstance(where, int) and where < len(positional) else where
                if isinstance(name, str) and name in env:
                    env[name] = SMETA
            for name in hook.request_lists:
                if name in env:
                    env[name] = INFO
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if env[a.arg] == UNK:
                bound = (param_kinds or {}).get(a.arg, UNK)
                env[a.arg] = bound if bound != UNK else (INFO if a.arg in INFO_NAMES else UNK)
        self.env0 = env
        self.silent = False  # first pass over a loop body only settles kinds; no callbacks

    def run(self) -> None:
        self._block(self.fn.body, Env(None, dict(self.env0)), Ctx(loops=1 if self.hot_body else 0))

    def on_expr(self, node: ast.AST, env: dict[str, str], ctx: Ctx, in_comp: bool) -> None:  # pragma: no cover
        pass

    def on_test(self, test: ast.AST, env: dict[str, str], ctx: Ctx) -> None:
        """A value whose truth Python evaluates (if/while/assert/ternary/not/and/or)."""

    # --- statements -------------------------------------------------------------------------
    def on_cold_call(self, call: ast.Call, env: dict[str, str]) -> None:
        """A call outside any hot region (cold_fast walkers only)."""

    def _exprs(self, stmt: ast.stmt, env: dict[str, str], ctx: Ctx) -> None:
        if self.silent:
            return
        if self.cold_fast and ctx.loops == 0 and self.fn_info is not None and self.lines is not None:
            for call in (self.fn_info.stmt_calls or {}).get(id(stmt), ()):
                self.on_cold_call(call, env)
            last = stmt.lineno if hasattr(stmt, "body") else getattr(stmt, "end_lineno", stmt.lineno)
            if " for " not in "\n".join(self.lines[stmt.lineno - 1 : last]):
                return  # cold and no comprehension: nothing here runs per element
        elif (
            self.expr_needle is not None
            and self.lines is not None
            and not hasattr(stmt, "body")
            and getattr(stmt, "end_lineno", None) is not None  # not a synthetic `while` test
        ):
            text = "\n".join(self.lines[stmt.lineno - 1 : stmt.end_lineno])
            if "for" not in text and not self.expr_needle.search(text):
                return
        error = ctx.error_path or isinstance(stmt, ast.Raise)
        c = Ctx(ctx.loops, ctx.guarded, error)
        if isinstance(stmt, ast.Assert):
            self.on_test(stmt.test, env, c)
            roots = [stmt.test]
        else:
            roots = stmt_exprs(stmt)
        for root in roots:
            nodes = list(walk_expr(root))
            for n, _comp in nodes:
                if type(n) in _COMPS:
                    # Comprehension variables take the kind of what they iterate (`[x.item() for x in infos]`).
                    for g in n.generators:
                        it = self.eval.kind(env, g.iter)
                        self._assign(g.target, it if it in (DEV, CPU, ND, INFO) else UNK, env)
            for n, comp in nodes:
                self.on_expr(n, env, c, comp)
                if isinstance(n, ast.BoolOp):
                    for v in n.values[:-1]:
                        self.on_test(v, env, c)
                elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
                    self.on_test(n.operand, env, c)
                elif isinstance(n, ast.IfExp):
                    self.on_test(n.test, env, c)
                elif type(n) in _COMPS:
                    for g in n.generators:
                        for cond in g.ifs:
                            self.on_test(cond, env, Ctx(c.loops + 1, c.guarded, c.error_path))

    def _assign(self, target: ast.AST, kind: str, env: dict[str, str], value: ast.AST | None = None) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = kind
        elif isinstance(target, ast.Tuple | ast.List):
            elt_kind = kind if kind in (DEV, CPU) and isinstance(value, ast.Call) else UNK
            if kind == INFO:
                elt_kind = INFO  # `i, info = numbered[k]`: parts of a host-side payload
            if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts, strict=False):
                    self._assign(t, self.eval.kind(env, v), env, v)
                return
            for t in target.elts:
                self._assign(t, elt_kind, env)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, PY, env)

    def _quiet(self, body: list[ast.stmt], env: dict[str, str], ctx: Ctx) -> dict[str, str]:
        saved, self.silent = self.silent, True
        try:
            return self._block(body, env.fork(), ctx)
        finally:
            self.silent = saved

    def _block(self, body: list[ast.stmt], env: dict[str, str], ctx: Ctx) -> dict[str, str]:
        for stmt in body:
            env = self._stmt(stmt, env, ctx)
        return env

    def _stmt(self, stmt: ast.stmt, env: dict[str, str], ctx: Ctx) -> dict[str, str]:
        if isinstance(stmt, FUNC_TYPES + (ast.ClassDef,)):
            return env
        self._exprs(stmt, env, ctx)
        if isinstance(stmt, ast.Assign):
            k = self.eval.kind(env, stmt.value)
            for t in stmt.targets:
                self._assign(t, k, env, stmt.value)
                if isinstance(t, ast.Name) and isinstance(stmt.value, ast.Dict):
                    for key, v in zip(stmt.value.keys, stmt.value.values, strict=False):
                        if isinstance(key, ast.Constant) and isinstance(key.value, str):
                            env[f"{t.id}[{key.value!r}]"] = self.eval.kind(env, v)
                elif (slot := dict_key(t)) is not None:
                    env[slot] = k
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            k = self.eval.kind(env, stmt.value)
            ak = _annotation_kind(stmt.annotation)
            self._assign(stmt.target, k if k != UNK else ak, env, stmt.value)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            env[stmt.target.id] = self.eval._combine([env.get(stmt.target.id, UNK), self.eval.kind(env, stmt.value)])
        elif isinstance(stmt, ast.If):
            if not self.silent:
                self.on_test(stmt.test, env, ctx)
            guarded = is_run_once_test(stmt.test)
            then_env = env.fork()
            host = _off_device_name(stmt.test)
            if host is not None:
                then_env[host] = HOST  # `if x.device.type != accel:` / `if x.device.type == "cpu":`
            a = self._block(stmt.body, then_env, Ctx(ctx.loops, ctx.guarded or guarded, ctx.error_path))
            b = self._block(stmt.orelse, env.fork(), ctx)
            return env.merge([a, b])
        elif isinstance(stmt, ast.For | ast.AsyncFor):
            it = self.eval.kind(env, stmt.iter)
            inner = Ctx(ctx.loops + 1, ctx.guarded, ctx.error_path)
            loop_env = env.fork()
            self._assign_for(stmt, it, loop_env)
            loop_env.merge([self._quiet(stmt.body, loop_env, inner)], keep=True)
            self._assign_for(stmt, it, loop_env)
            loop_env.merge([self._block(stmt.body, loop_env.fork(), inner)], keep=True)
            after = env.merge([loop_env], keep=True)
            return self._block(stmt.orelse, after, ctx)
        elif isinstance(stmt, ast.While):
            inner = Ctx(ctx.loops + 1, ctx.guarded, ctx.error_path)
            loop_env = env.fork()
            loop_env.merge([self._quiet(stmt.body, loop_env, inner)], keep=True)
            if not self.silent:
                self.on_test(stmt.test, loop_env, inner)
                self._exprs(ast.Expr(stmt.test), loop_env, inner)
            loop_env.merge([self._block(stmt.body, loop_env.fork(), inner)], keep=True)
            return self._block(stmt.orelse, env.merge([loop_env], keep=True), ctx)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            for item in stmt.items:
                if item.optional_vars is not None:
                    self._assign(item.optional_vars, UNK, env)
            sub = Ctx(ctx.loops, ctx.guarded or is_graph_capture(stmt), ctx.error_path)
            return self._block(stmt.body, env, sub)
        elif isinstance(stmt, ast.Try) or (hasattr(ast, "TryStar") and isinstance(stmt, ast.TryStar)):
            after = self._block(stmt.body, env.fork(), ctx)
            outs = [self._block(stmt.orelse, after.fork(), ctx)]
            for h in stmt.handlers:
                outs.append(self._block(h.body, env.fork(), Ctx(ctx.loops, ctx.guarded, True)))
            return self._block(stmt.finalbody, env.merge(outs), ctx)
        elif isinstance(stmt, ast.Match):
            outs = [self._block(c.body, env.fork(), ctx) for c in stmt.cases]
            return env.merge(outs, keep=True)
        return env

    def _assign_for(self, stmt: ast.For, it: str, env: dict[str, str]) -> None:
        target, iter_ = stmt.target, stmt.iter
        if (
            isinstance(iter_, ast.Call)
            and dotted(iter_.func) == "enumerate"
            and iter_.args
            and isinstance(target, ast.Tuple)
            and len(target.elts) == 2
        ):
            self._assign(target.elts[0], PY, env)
            inner = self.eval.kind(env, iter_.args[0])
            self._assign(target.elts[1], inner if inner in (DEV, CPU, ND, INFO) else UNK, env)
            return
        if isinstance(iter_, ast.Call) and dotted(iter_.func) == "range":
            self._assign(target, PY, env)
            return
        self._assign(target, it if it in (DEV, CPU, ND, INFO) else UNK, env)


class _ReturnWalker(FlowWalker):
    """Collects the kinds of a function's return values."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.kinds: list[str] = []

    def _stmt(self, stmt: ast.stmt, env, ctx: Ctx):
        if isinstance(stmt, ast.Return):
            self.kinds.append(self.eval.kind(env, stmt.value) if stmt.value is not None else PY)
        return super()._stmt(stmt, env, ctx)


def _off_device_name(test: ast.AST) -> str | None:
    """The name a branch test proves to be off the accelerator, if any."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if (
            isinstance(left, ast.Attribute)
            and left.attr == "type"
            and isinstance(left.value, ast.Attribute)
            and left.value.attr == "device"
            and isinstance(left.value.value, ast.Name)
        ):
            name = left.value.value.id
            if isinstance(op, ast.NotEq) and not (isinstance(right, ast.Constant) and right.value == "cpu"):
                return name
            if isinstance(op, ast.Eq) and isinstance(right, ast.Constant) and right.value == "cpu":
                return name
    if (
        isinstance(test, ast.UnaryOp)
        and isinstance(test.op, ast.Not)
        and isinstance(test.operand, ast.Attribute)
        and test.operand.attr == "is_cuda"
        and isinstance(test.operand.value, ast.Name)
    ):
        return test.operand.value.id
    return None


_MISSING = object()


class Env:
    """The kinds of a function's variables at one point of the walk: a layer of assignments over the
    environment it was forked from. Forking and merging a branch cost O(names the branch assigned),
    not O(names in scope), so a long function stays linear (copying whole dicts per branch was
    quadratic: 48 s on a 400 KB function). A parent is never written while its forks are in use,
    and forks are merged back into the parent they came from; chains are as deep as the nesting."""

    __slots__ = ("local", "parent")

    def __init__(self, parent: Env | None = None, local: dict[str, str] | None = None) -> None:
        self.parent = parent
        self.local = {} if local is None else local

    def fork(self) -> Env:
        return Env(self)

    def get(self, name: str, default=None):
        env = self
        while env is not None:
            v = env.local.get(name, _MISSING)
            if v is not _MISSING:
                return v
            env = env.parent
        return default

    def __getitem__(self, name: str) -> str:
        v = self.get(name, _MISSING)
        if v is _MISSING:
            raise KeyError(name)
        return v

    def __contains__(self, name: str) -> bool:
        return self.get(name, _MISSING) is not _MISSING

    def __setitem__(self, name: str, kind: str) -> None:
        self.local[name] = kind

    def merge(self, branches: list[Env], keep: bool = False) -> Env:
        """Set this environment to the join of ``branches`` (forks of it, or forks of forks), folded
        in order as the old dict merge did; with ``keep``, this environment's own kinds join too.
        Names no branch assigned keep their kind (join(k, k) == k). Returns self."""
        names: set[str] = set()
        for b in branches:
            e = b
            while e is not None and e is not self:
                names.update(e.local)
                e = e.parent
        new = {}
        for name in names:
            acc = self.get(name, _MISSING) if keep else _MISSING
            for b in branches:
                v = b.get(name, _MISSING)
                if v is not _MISSING:
                    acc = v if acc is _MISSING else join(acc, v)
            new[name] = acc
        self.local.update(new)
        return self


def per_step_functions(
    index: ModuleIndex, extra: tuple[set[str], set[str]] | None = None
) -> Iterator[tuple[object, bool]]:
    """(FuncInfo, whole_body_hot) for every function that runs per step, callers before callees
    (so call-site argument kinds are known when a callee is walked). ``extra`` adds (per-step,
    hot) qualnames found by another analysis (hooks.extra_hot: per-request hooks, async-chunk
    stage processors)."""
    step_extra, hot_extra = extra or (set(), set())
    per_step = index.per_step | step_extra
    hot = index.hot | hot_extra
    order: list[str] = []
    seen: set[str] = set()
    queue = sorted(q for q in per_step if index.hook(index.functions[q]) is not None)
    queue += sorted(q for q in step_extra if q not in queue)
    while queue:
        qual = queue.pop(0)
        if qual in seen:
            continue
        seen.add(qual)
        order.append(qual)
        queue.extend(t.qualname for t, _l, _g in index.callees(index.functions[qual]) if t.qualname in per_step)
    order += sorted(per_step - seen)
    for qual in order:
        yield index.functions[qual], qual in hot


def bind_args(index: ModuleIndex, target, call: ast.Call) -> list[tuple[str, ast.AST]]:
    """(parameter name, argument expression) pairs of a resolved call."""
    params = [a.arg for a in [*target.node.args.posonlyargs, *target.node.args.args]]
    bound = isinstance(call.func, ast.Attribute) and target.cls is not None and params[:1] in (["self"], ["cls"])
    if bound or (target.name == "__init__" and params[:1] == ["self"]):
        params = params[1:]
    out = [(p, a) for p, a in zip(params, call.args, strict=False) if not isinstance(a, ast.Starred)]
    names = set(params) | {a.arg for a in target.node.args.kwonlyargs}
    out += [(k.arg, k.value) for k in call.keywords if k.arg in names]
    return out
