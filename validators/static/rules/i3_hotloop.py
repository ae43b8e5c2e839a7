"""I3 — hot-loop GPU discipline: no host syncs inside per-step or per-request loops of model code.

One analysis per file feeds the five rules: the module index says which functions run per step
and which run inside a hot loop; the flow walker says whether a value is a device tensor, a CPU
tensor or a host value, so CPU-side bookkeeping is not reported.
"""

from __future__ import annotations

import ast
import re

from omnitts.validators.static.hooks import extra_hot
from omnitts.validators.static.index import FUNC_TYPES, Ctx, dotted, iter_stmts, stmt_exprs, walk
from omnitts.validators.static.rule import Invalid, Report, Rule, Valid, register
from omnitts.validators.static.source import SourceFile
from omnitts.validators.static.tensors import (
    COPY,
    DEV,
    HOST_KINDS,
    FlowWalker,
    _is_cpu_literal,
    bind_args,
    join,
    per_step_functions,
)

# Arguments of these logging calls are only evaluated on anomaly paths worth a warning.
_ANOMALY_LOG = ("warning", "warning_once", "warn", "error", "exception", "critical", "fatal")

I3_ITEM, I3_COPY, I3_CAST, I3_FILL, I3_FLOW = (f"OMNI-I3-00{i}" for i in range(1, 6))
NEEDLES = (
    "def forward",
    "def make_omni_output",
    "def compute_logits",
    "def preprocess",
    "def postprocess",
    "postprocess(",
    "def sample",
    "def talker_mtp",
)
# Calls that only log: their arguments are evaluated every time the statement runs, whatever the
# log level (`logger.debug("%s", t.item())` syncs even with debug logging off).
_LOG_CALL = re.compile(r"(^|\.)(logger|logging|log|_logger|LOGGER)\.(debug|info|log)$|^print$")
_LOG_HELPER = re.compile(r"^_?(warn|log)")
_REDUCE = ("any", "all")


def _step_hook(src: SourceFile, fn) -> bool:
    """A runner hook that does the same work on every step (preprocess is left out: it mixes prefill-only
    work in)."""
    hook = src.index.hook(fn)
    return hook is not None and not hook.prefill_work


_DEVICE_ARG = re.compile(r"device|cuda|dev\b|\bdev$")


class _SyncWalker(FlowWalker):
    cold_fast = True

    def __init__(
        self,
        src: SourceFile,
        fn,
        hot: bool,
        out: dict[str, dict[int, Report]],
        params: dict,
        per_request: bool,
        step_always: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(src.index, fn.node, src.index.class_of(fn), hot, params.get(fn.qualname), fn, src.lines)
        self.info = fn
        self.params = params
        self.qual = fn.qualname
        self.out = out
        self.consumed: set[int] = set()
        self.src = src
        self.per_request = per_request  # hot because the runner calls it per request (hooks.py)
        self.copies: dict[str, ast.Call] = {}  # name -> the `.cpu()` that made the host copy it holds
        # The once-per-step checks (log reads, log-only branches, reductions) apply to the step hooks
        # themselves and to hot code; helpers reached from them may run at prefill only.
        self.step_hook = hot or _step_hook(src, fn) or fn.qualname in step_always

    def _where(self, ctx: Ctx) -> str:
        if self.hot_body and self.per_request and ctx.loops <= 1:
            return f"in `{self.qual}`, which the runner calls for every request on every step"
        return (
            f"in a per-step loop of `{self.qual}`"
            if not self.hot_body
            else f"in `{self.qual}`, which runs inside a per-step loop"
        )

    # --- per-step code outside loops: only what is clearly wasted per step -----------------------
    def _exprs(self, stmt: ast.stmt, env: dict[str, str], ctx: Ctx) -> None:
        if self.step_hook and not self.silent and ctx.loops == 0 and not ctx.guarded and not ctx.error_path:
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if isinstance(call, ast.Call) and _LOG_CALL.search(dotted(call.func)):
                self._log_reads(call, env)
        super()._exprs(stmt, env, ctx)

    def _round_trip(self, stmt: ast.stmt, env: dict[str, str]) -> None:
        """`.to(<device>)`/`.cuda()` of a host copy this step made of a device tensor (any statement of a
        function that runs every step; the walk skips cold statements' expressions otherwise)."""
        text = "\n".join(self.src.lines[stmt.lineno - 1 : getattr(stmt, "end_lineno", stmt.lineno)])
        if ".to(" not in text and ".cuda(" not in text:
            return
        for expr in stmt_exprs(stmt):
            for node in walk(expr):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and (node.func.attr == "cuda" or (node.func.attr == "to" and _to_device(node)))
                    and self.eval.kind(env, node.func.value) == COPY
                ):
                    origin = self.copies.get(_name_of(node.func.value))
                    at = origin if origin is not None else node
                    self._add(
                        I3_COPY,
                        at,
                        f"`{_short(self.src, at)}` in `{self.qual}` copies a device tensor to the host and line "
                        f"{node.lineno} moves it back: two full copies and a sync every step; do the work on the "
                        "device",
                    )

    def _stmt(self, stmt: ast.stmt, env: dict[str, str], ctx: Ctx) -> dict[str, str]:
        if self.step_hook and not self.silent and not ctx.guarded and not ctx.error_path:
            self._round_trip(stmt, env)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            # where each copy of a device tensor was made (for the round-trip report), through aliases
            name, value = stmt.targets[0].id, stmt.value
            d2h = _d2h_call(value)
            if d2h is not None and self.eval.kind(env, d2h.func.value) not in HOST_KINDS:
                self.copies[name] = d2h
            elif isinstance(value, ast.Name) and value.id in self.copies:
                self.copies[name] = self.copies[value.id]
        if (
            isinstance(stmt, ast.If)
            and self.step_hook
            and not self.silent
            and ctx.loops == 0
            and not ctx.guarded
            and not ctx.error_path
            and _log_only(stmt.body)
            and not stmt.orelse
        ):
            for part in _conjuncts(stmt.test):
                if self.eval.kind(env, _unnot(part)) == DEV:
                    self._add(
                        I3_FLOW,
                        part,
                        f"`{_short(self.src, part)}` is read back from the device on every step of "
                        f"`{self.qual}` only to decide whether to log: a sync per step for a log line",
                    )
                    self.consumed.add(id(part))
        return super()._stmt(stmt, env, ctx)

    def _log_reads(self, call: ast.Call, env: dict[str, str]) -> None:
        """Per-step logging whose arguments read tensor values (`.item()`, `.tolist()`, `.cpu()`)."""
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            for n in walk(arg):
                if (
                    isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and n.func.attr in ("item", "tolist", "cpu")
                    and not n.args
                    and self.eval.kind(env, n.func.value) not in HOST_KINDS
                ):
                    self._add(
                        I3_ITEM if n.func.attr == "item" else I3_COPY,
                        n,
                        f"`{_short(self.src, n)}` in a log call of `{self.qual}` syncs on every step, "
                        "whatever the log level (log host values, or guard the call)",
                    )
                    self.consumed.add(id(n))

    def _add(self, rule: str, node: ast.AST, message: str, fix=None) -> None:
        self.out[rule].setdefault(id(node), Rule.at(node, message, fix))

    @staticmethod
    def _hot(ctx: Ctx, in_comp: bool) -> bool:
        return (ctx.loops > 0 or in_comp) and not ctx.guarded and not ctx.error_path

    def on_expr(self, node: ast.AST, env: dict[str, str], ctx: Ctx, in_comp: bool) -> None:
        if not isinstance(node, ast.Call):
            return
        self._record_args(node, env)
        if not self._hot(ctx, in_comp):
            return
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _ANOMALY_LOG and "log" in dotted(func.value).lower():
            for arg in walk(node):
                self.consumed.add(id(arg))
            return
        if id(node) in self.consumed:
            return
        kind = self.eval.kind
        if isinstance(func, ast.Attribute):
            m, recv = func.attr, func.value
            if m == "fill_" and len(node.args) == 1 and not node.keywords and _is_item(node.args[0]):
                inner = node.args[0]
                self.consumed.add(id(inner))
                if kind(env, inner.func.value) not in HOST_KINDS:
                    fix = (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, "fill_item_to_copy")
                    self._add(
                        I3_FILL,
                        node,
                        f"`{_short(self.src, node)}` {self._where(ctx)} syncs to read the scalar back; "
                        "write it device-side with `dst.copy_(src)`",
                        fix,
                    )
                return
            if m == "item" and not node.args and id(node) not in self.consumed:
                if kind(env, recv) not in HOST_KINDS:
                    self._add(
                        I3_ITEM,
                        node,
                        f"`{_short(self.src, node)}` {self._where(ctx)} forces a GPU->CPU sync per iteration",
                    )
            elif m in ("cpu", "tolist") and not node.args:
                if kind(env, recv) not in HOST_KINDS:
                    self._add(I3_COPY, node, f"`.{m}()` {self._where(ctx)} copies device->host (a sync) per iteration")
            elif m == "to" and any(_is_cpu_literal(a) for a in [*node.args, *(k.value for k in node.keywords)]):
                if kind(env, recv) not in HOST_KINDS:
                    self._add(
                        I3_COPY, node, f"`.to('cpu')` {self._where(ctx)} copies device->host (a sync) per iteration"
                    )
            elif m == "numpy" and not node.args and kind(env, recv) == DEV:
                self._add(I3_COPY, node, f"`.numpy()` of a device tensor {self._where(ctx)} needs a device->host copy")
        elif (
            isinstance(func, ast.Name)
            and func.id in ("int", "float", "bool")
            and len(node.args) == 1
            and not node.keywords
        ):
            if kind(env, node.args[0]) == DEV or _tensor_compare(node.args[0], env, kind):
                self._add(
                    I3_CAST,
                    node,
                    f"`{func.id}()` of a tensor {self._where(ctx)} reads its value back to the host (a sync)",
                )

    def on_cold_call(self, call: ast.Call, env: dict[str, str]) -> None:
        self._record_args(call, env)

    def _record_args(self, call: ast.Call, env: dict[str, str]) -> None:
        target = self.src.index.resolve(self.info, call)
        if target is None:
            return
        slot = self.params.setdefault(target.qualname, {})
        for name, arg in bind_args(self.src.index, target, call):
            k = self.eval.kind(env, arg)
            slot[name] = join(slot[name], k) if name in slot else k

    def on_test(self, test: ast.AST, env: dict[str, str], ctx: Ctx) -> None:
        if id(test) in self.consumed:
            return
        if (
            self.step_hook
            and not self._hot(ctx, False)
            and not ctx.guarded
            and not ctx.error_path
            and self.eval.kind(env, _unnot(test)) == DEV
        ):
            # `if mask.any():` in a per-step hook: a data-dependent branch, one sync per step (and a
            # CUDA-graph breaker) where torch.where/masking computes both sides on the device.
            self._add(
                I3_FLOW,
                test,
                f"Python branches on tensor value `{_short(self.src, test)}` once per step in `{self.qual}`: "
                "evaluating it syncs; compute both sides and select with torch.where/masking",
            )
            return
        if self._hot(ctx, False) and self.eval.kind(env, test) == DEV:
            self._add(
                I3_FLOW,
                test,
                f"Python branches on tensor value `{_short(self.src, test)}` {self._where(ctx)}: "
                "evaluating it syncs; use torch.where/masking or decide on the host once per step",
            )


# Functions worth walking: hot ones, ones with a loop, and step hooks with code the walker checks
# outside loops (log calls, branches on reductions).
_HAS_LOOP = re.compile(r"\bfor\b|\bwhile\b")
_STEP_WORK = re.compile(r"log\w*\.|print\(|\.any\(\)|\.all\(\)|_warn|\.cpu\(|[\"']cpu[\"']")


def _conjuncts(test: ast.AST) -> list[ast.AST]:
    """The operands of nested `and`/`or` chains (each is evaluated for its truth value)."""
    if isinstance(test, ast.BoolOp):
        return [p for v in test.values for p in _conjuncts(v)]
    return [test]


def _unnot(test: ast.AST) -> ast.AST:
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    return test


def _is_reduction(test: ast.AST) -> bool:
    t = _unnot(test)
    return isinstance(t, ast.Call) and isinstance(t.func, ast.Attribute) and t.func.attr in _REDUCE and not t.args


def _log_only(body: list[ast.stmt]) -> bool:
    """A branch that only logs or warns (a logging call or a `_warn*`/`_log*` helper)."""
    for s in body:
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)):
            return False
        name = dotted(s.value.func)
        if not (_LOG_CALL.search(name) or _ANOMALY_LOG_NAME.search(name) or _LOG_HELPER.match(name.split(".")[-1])):
            return False
    return bool(body)


_ANOMALY_LOG_NAME = re.compile(
    r"(^|\.)(logger|logging|log|_logger|LOGGER)\.(warning|warning_once|warn)$|warnings\.warn$"
)


def _tensor_compare(node: ast.AST, env, kind) -> bool:
    """`a[0, 1] > a[0, 0]`: a comparison of multi-dimensionally indexed values (tensors or arrays,
    not Python lists) whose kind is not known to be on the host."""
    if not isinstance(node, ast.Compare) or len(node.ops) != 1:
        return False
    sides = [node.left, *node.comparators]
    return all(
        isinstance(s, ast.Subscript) and isinstance(s.slice, ast.Tuple) and kind(env, s.value) not in HOST_KINDS
        for s in sides
    ) and not any(kind(env, s.value) == "nd" for s in sides)


def step_always(src: SourceFile) -> frozenset[str]:
    """Functions that run on every step: the step hooks (not `preprocess`, which mixes prefill-only work in)
    and what they call outside run-once guards, CUDA-graph capture and error handlers."""
    cached = src.__dict__.get("_step_always")
    if cached is not None:
        return cached
    index = src.index
    seeds = [fn for fn in index.functions.values() if _step_hook(src, fn)]
    seen: set[str] = set()
    while seeds:
        fn = seeds.pop()
        if fn.qualname in seen:
            continue
        seen.add(fn.qualname)
        for call in _unconditional_calls(fn.node.body):
            target = index.resolve(fn, call) or index.resolve_module_call(fn, call)
            if target is not None and target.qualname not in seen:
                seeds.append(target)
    cached = src.__dict__["_step_always"] = frozenset(seen)
    return cached


def _unconditional_calls(body: list[ast.stmt]):
    """Calls a function makes on every run that reaches them: not behind a run-once guard, in a CUDA-graph
    capture or in an error handler (calls in loops are hot anyway)."""
    for stmt, ctx in iter_stmts(body):
        if ctx.guarded or ctx.error_path or isinstance(stmt, FUNC_TYPES):
            continue
        for expr in stmt_exprs(stmt):
            yield from (n for n in walk(expr) if isinstance(n, ast.Call))


def _name_of(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def _d2h_call(value: ast.AST) -> ast.Call | None:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        if value.func.attr == "cpu" and not value.args:
            return value
        if value.func.attr == "to" and any(
            _is_cpu_literal(a) for a in [*value.args, *(k.value for k in value.keywords)]
        ):
            return value
    return None


def _to_device(call: ast.Call) -> bool:
    for a in [*call.args, *(k.value for k in call.keywords if k.arg == "device")]:
        if _is_cpu_literal(a):
            return False
        if isinstance(a, ast.Attribute) and a.attr == "device":
            return True
        if isinstance(a, ast.Name) and _DEVICE_ARG.search(a.id):
            return True
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("cuda"):
            return True
    return False


def _is_item(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "item"
        and not node.args
    )


def _short(src: SourceFile, node: ast.AST) -> str:
    text = " ".join(src.segment(node).split())
    return text if len(text) <= 60 else text[:57] + "..."


def analyze(src: SourceFile) -> dict[str, list[Report]]:
    cached = src.__dict__.get("_i3")
    if cached is None:
        out: dict[str, dict[int, Report]] = {r: {} for r in (I3_ITEM, I3_COPY, I3_CAST, I3_FILL, I3_FLOW)}
        params: dict[str, dict[str, str]] = {}
        step_extra, hot_extra = extra_hot(src)
        fns = list(per_step_functions(src.index, (step_extra, hot_extra)))
        # Only functions with a hot region need the walk; callers are walked when a callee is, so
        # that call-site argument kinds reach it (callers come first in the order).
        always = step_always(src)
        need = {
            fn.qualname
            for fn, hot in fns
            if hot
            or _HAS_LOOP.search(text := src.node_text(fn.node))
            or ((_step_hook(src, fn) or fn.qualname in always) and _STEP_WORK.search(text))
        }
        for fn, _hot in reversed(fns):
            if fn.qualname not in need and any(t.qualname in need for t, _l, _g in src.index.callees(fn)):
                need.add(fn.qualname)
        for fn, hot in fns:
            if fn.qualname in need:
                _SyncWalker(src, fn, hot, out, params, fn.qualname in hot_extra, always).run()
        cached = {
            r: sorted({(rep.line, rep.col): rep for rep in v.values()}.values(), key=lambda rep: (rep.line, rep.col))
            for r, v in out.items()
        }
        src.__dict__["_i3"] = cached
    return cached


class _I3Rule(Rule):
    invariant = "I3"
    severity = "error"
    needles = NEEDLES

    def check(self, src: SourceFile):
        yield from analyze(src)[self.id]


_LOOP = """
import torch

class Talker(torch.nn.Module):
    def forward(self, input_ids: torch.Tensor, runtime_additional_information=None, **kwargs):
        codes = input_ids.float()
        out = []
        for step in range(8):
{body}
        return out
"""


# A per-request hook: the runner calls postprocess for every scheduled request after every step.
_POST = """
import torch

class Talker(torch.nn.Module):
    def postprocess(self, hidden_states, **info):
        # keep the last hidden state for the next step
        last = {keep}
        return {{"last_hidden": last}}
"""

_ROUND_TRIP = """
import torch

class Talker(torch.nn.Module):
    def compute_logits(self, hidden_states, sampling_metadata=None):
        logits = self.lm_head(hidden_states)
        logits_cpu = logits.cpu()
        logits_cpu[:, self.suppressed] = -1e9
        logits = logits_cpu.to(logits.device)
        return logits
"""

_QUEUE = """
import torch

class Talker(torch.nn.Module):
    def compute_logits(self, hidden_states, sampling_metadata=None):
        flags = []
        for i, (rid, stop_logits) in enumerate(self._queue):
            flags.append({read})
        self._flags = flags
        return self.lm_head(hidden_states)
"""

_WARN = """
import torch

class Talker(torch.nn.Module):
    def compute_logits(self, hidden_states, sampling_metadata=None):
        logits = self.lm_head(hidden_states)
        if sampling_metadata is not None and ({test}):
            self._warn_sampling(sampling_metadata)
        return logits
"""

_MTP = """
import torch

class Talker(torch.nn.Module):
    def talker_mtp(self, input_ids: torch.Tensor, embeds: torch.Tensor, codes: torch.Tensor):
        mask = input_ids >= self.first_audio_id
        {body}
        return embeds

    def forward(self, input_ids, positions, **kwargs):
        return self.model(input_ids, positions)
"""

_STEP_LOG = """
import logging

import torch

logger = logging.getLogger(__name__)


class Talker(torch.nn.Module):
    def forward(self, input_ids, positions, **kwargs):
        codes = self.head(input_ids).argmax(-1)
{line}
        return codes
"""


def _loop(body: str) -> str:
    return _LOOP.format(body="\n".join("            " + line for line in body.strip().splitlines()))


@register
class HotItem(_I3Rule):
    """`.item()` on a tensor inside a per-step or per-request loop of model code.

    Loops in `forward()` and in the helpers it calls (per-request loops, AR decode, diffusion
    solver, vocoder block loops) run on every engine step; a function called from such a loop is
    hot in its whole body. Not reported: one read outside the loops, code behind a run-once guard
    (`if self._x is None:`, `if key not in self._cache:`, CUDA-graph capture, debug-only branches),
    error paths, and tensors known to live on the CPU (`.cpu()` results, factories without
    `device=`, names ending in `_cpu`). In a step hook, a logging call whose arguments read a tensor
    (`logger.debug("%d", t.item())`) is reported outside loops too: its arguments are evaluated on
    every step whatever the log level. Stage-input processors are not model code here: they run in
    the scheduler on the runner's host copy of the outputs.

    Why: each `.item()` waits for the GPU queue to drain; at 10 steps x 60 frames x 4 reads that is
    2,400 syncs per request, and it breaks CUDA-graph capture.

    Fix: keep the value on the device (`torch.where`, masking, `dst.copy_(src)`), or read all values
    once per forward with one batched `.tolist()` outside the loop.
    """

    id = I3_ITEM
    name = "hot-loop-item"
    VALID = [
        Valid(_loop("out.append(codes[step] * 2)"), note="device-side only"),
        Valid(_loop("n = torch.tensor([1, 2, 3])\nout.append(n[step].item())"), note="CPU tensor"),
        Valid(
            """
import torch

class Talker(torch.nn.Module):
    def forward(self, input_ids, **kwargs):
        lengths = self.lengths_buf.tolist()  # one batched host copy per forward
        out = []
        for n in lengths:
            out.append(input_ids[:n])
        return out
""",
            note="one batched copy outside the loop",
        ),
        Valid(
            """
import torch

class Talker(torch.nn.Module):
    def forward(self, input_ids, **kwargs):
        for step in range(4):
            if self._graph is None:
                self._scale = self.scale_buf.max().item()
        return input_ids
""",
            note="run-once guard",
        ),
        Valid(
            _loop(
                "if step % 50 == 0:\n    logger.debug('tok %d', codes[step].argmax().item())\nout.append(codes[step])"
            ),
            note="sampled logging (every N-th step)",
        ),
        Valid(
            """
import torch

def offline_generate(model, ids):
    for _ in range(100):
        tok = model(ids).argmax(-1)
        if tok.item() == 2:
            break
""",
            note="not reachable from a model hook",
        ),
        Valid(_STEP_LOG.format(line='        logger.debug("batch of %d", codes.shape[0])'), note="shape metadata"),
        Valid(
            _STEP_LOG.format(
                line=(
                    "        if logger.isEnabledFor(logging.DEBUG):\n"
                    '            logger.debug("first %d", codes[0].item())'
                )
            ),
            note="debug-guarded",
        ),
    ]
    INVALID = [
        Invalid(_loop("tok = self.lm_head(codes).argmax(-1)\nout.append(tok.item())"), line=10, message="`tok.item()`"),
        Invalid(
            """
import torch

class Code2Wav(torch.nn.Module):
    def forward(self, input_ids, **kwargs):
        out = []
        for chunk in input_ids.split(4):
            out.append(self._decode(chunk))
        return out

    def _decode(self, chunk):
        scale = chunk.abs().max().item()
        return chunk / scale
""",
            line=12,
            message="which runs inside a per-step loop",
        ),
        Invalid(
            _STEP_LOG.format(line='        logger.debug("first code %d", codes[0].item())'),
            line=12,
            message="whatever the log level",
        ),
    ]


@register
class HotHostCopy(_I3Rule):
    """`.cpu()`, `.tolist()`, `.to("cpu")` or `.numpy()` of a device tensor inside a per-step or
    per-request loop of model code.

    Same hot-loop scope and exclusions as OMNI-I3-001; a `.cpu()` of a tensor already on the CPU is a
    no-op and is not reported. Hot also: `postprocess` (the runner calls it for every request after
    every step) and what it calls. Outside loops, one pattern is reported in every step hook: a
    device->host->device round trip (`x_cpu = t.cpu()` ... `x_cpu.to(t.device)`).

    Why: every device->host copy synchronizes the stream; inside a loop it serializes the GPU once
    per iteration instead of once per step.

    Fix: move the copy out of the loop (one `.tolist()`/`.cpu()` of the whole batch per forward) or
    keep the computation on the device.
    """

    id = I3_COPY
    name = "hot-loop-host-copy"
    VALID = [
        Valid(
            """
import torch

class Talker(torch.nn.Module):
    def forward(self, input_ids: torch.Tensor, **kwargs):
        host = self.embed(input_ids).argmax(-1).cpu()  # one batched copy per forward
        out = []
        for step in range(8):
            out.append(host[step].tolist())
        return out
""",
            note="`.tolist()` of a CPU tensor is free",
        ),
        Valid(_loop("out.append(codes[step].to(torch.float32))")),
        Valid(_POST.format(keep="hidden_states[-1].detach()"), note="the runner keeps it on the device"),
        Valid(
            _ROUND_TRIP.replace("logits_cpu = logits.cpu()", "mask = self.suppress_mask.to(logits.device)")
            .replace("logits_cpu[:, self.suppressed] = -1e9", "logits = logits.masked_fill(mask, -1e9)")
            .replace("logits = logits_cpu.to(logits.device)", "pass"),
            note="the mask moves to the device once; no host copy of the logits",
        ),
    ]
    INVALID = [
        Invalid(_loop("out.append(codes[step].tolist())"), line=9, message="`.tolist()`"),
        Invalid(
            _loop("wav = self.vocoder(codes[step])\nout.append(wav.detach().cpu().numpy())"),
            line=10,
            message="`.cpu()`",
        ),
        Invalid(_POST.format(keep='hidden_states[-1].detach().to("cpu")'), line=7, message="every request"),
        Invalid(_ROUND_TRIP, line=7, message="moves it back"),
    ]


@register
class HotScalarCast(_I3Rule):
    """`int()`, `float()` or `bool()` of a device tensor inside a per-step or per-request loop.

    Only values the walker knows to be tensors are reported (`int(x.shape[0])`, `int(n)` of a Python
    number, and CPU tensors are fine), plus comparisons of multi-dimensionally indexed values that are
    not known to be NumPy (`bool(stop_logits[0, 1] > stop_logits[0, 0])`).

    Why: converting a tensor to a Python number is `.item()` in disguise: one GPU->CPU sync per
    iteration.

    Fix: compute on the device, or convert once per forward outside the loop.
    """

    id = I3_CAST
    name = "hot-loop-scalar-cast"
    VALID = [
        Valid(_loop("out.append(int(codes.shape[0]) + step)")),
        Valid(_loop("lens = torch.tensor([3, 4])\nout.append(int(lens[0]))")),
        Valid(
            """
import numpy as np
import torch

class Talker(torch.nn.Module):
    def compute_logits(self, hidden_states, sampling_metadata=None):
        stops = np.asarray(self._stop_table)
        flags = [bool(stops[i, 1] > stops[i, 0]) for i in range(len(self._queue))]
        self._flags = flags
        return self.lm_head(hidden_states)
""",
            note="NumPy values",
        ),
    ]
    INVALID = [
        Invalid(_loop("n = int(codes[step].sum())\nout.append(n)"), line=9, message="`int()` of a tensor"),
        Invalid(
            _QUEUE.format(read="bool(stop_logits[0, 1] > stop_logits[0, 0])"), line=8, message="`bool()` of a tensor"
        ),
    ]


@register
class HotFillItem(_I3Rule):
    """`dst.fill_(src.item())` inside a per-step or per-request loop.

    Why: reading the scalar back to the host only to write it into another device tensor costs a
    sync for nothing; `copy_` does the same write on the device.

    Fix: `dst.copy_(src)` (autofix: `omnitts-lint --fix`).
    """

    id = I3_FILL
    name = "fill-item"
    fixable = True
    VALID = [Valid(_loop("self.pos_buf.copy_(codes[step])\nout.append(self.pos_buf)"))]
    INVALID = [
        Invalid(
            _loop("self.pos_buf.fill_(codes[step].item())\nout.append(self.pos_buf)"),
            line=9,
            message="copy_",
            fixed=_loop("self.pos_buf.copy_(codes[step])\nout.append(self.pos_buf)"),
        )
    ]


@register
class HotTensorBranch(_I3Rule):
    """Python control flow on a tensor value (`if t:`, `while not done.all():`, `x and y`, a ternary)
    inside a per-step or per-request loop; in the step hooks themselves (`forward`, `compute_logits`,
    `sample`, `make_omni_output`, `postprocess`, `talker_mtp`) also a branch on `.any()`/`.all()`
    taken once per step, and a branch on a device value whose body only logs or warns
    (`if (sampling_metadata.temperature <= 0).any(): self._warn(...)`).

    Why: Python must read the tensor to decide the branch, which synchronizes, and data-dependent
    branches break CUDA graphs and `torch.compile` graphs.

    Fix: express the choice with `torch.where`/masking, or make the decision on host-side data that
    the step already has (lengths, flags kept as Python values).
    """

    id = I3_FLOW
    name = "hot-loop-tensor-branch"
    VALID = [
        Valid(_loop("if codes.shape[0] > step:\n    out.append(codes[step])")),
        Valid(_loop("out.append(torch.where(codes[step] > 0, codes[step], 0))")),
        Valid(_WARN.format(test="sampling_metadata.temperature is None"), note="no tensor value read"),
        Valid(
            _MTP.format(body="embeds = torch.where(mask.unsqueeze(-1), embeds + self.extra(codes), embeds)"),
            note="both sides on the device",
        ),
    ]
    INVALID = [
        Invalid(
            _loop("tok = codes[step]\nif (tok == 2).any():\n    break\nout.append(tok)"),
            line=10,
            message="branches on tensor",
        ),
        Invalid(_WARN.format(test="(sampling_metadata.temperature <= 0).any()"), line=7, message="only to decide"),
        Invalid(
            _MTP.format(body="if mask.any():\n            embeds = embeds + self.extra(codes)"),
            line=7,
            message="once per step",
        ),
    ]
