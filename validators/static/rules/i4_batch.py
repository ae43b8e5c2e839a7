"""I4 (static part) — batched output hooks emit one entry per request, built inside the
per-request loop; what a `max_num_seqs>1` smoke test would catch, found before it runs."""

from __future__ import annotations

import ast
import re

from omnitts.validators.static.batch import (
    BATCH_HOOKS,
    loop_binds_request,
    own_nodes,
    per_request_lists,
    request_counts,
)
from omnitts.validators.static.index import FUNC_TYPES, dotted, is_self_attr, iter_stmts, stmt_exprs, walk
from omnitts.validators.static.rule import Invalid, Rule, Valid, register
from omnitts.validators.static.source import SourceFile

_HDR = '''
import torch
from vllm_omni.model_executor.models.output_templates import OmniOutput


class Code2Wav(torch.nn.Module):
    def forward(self, input_ids, runtime_additional_information=None, **kwargs):
        """Delta audio."""
'''


def _m(body: str) -> str:
    return _HDR + "\n".join("        " + line for line in body.strip().splitlines()) + "\n"


def _hooks(src: SourceFile):
    for cls in src.index.classes.values():
        for name in BATCH_HOOKS:
            fn = cls.methods.get(name)
            if fn is not None and any(k in src.node_text(fn.node) for k in _LISTS):
                yield fn


def _len_one_guarded(fn: ast.AST, node: ast.AST) -> bool:
    """True when the function states a batch of one (`assert len(xs) == 1`, `if len(xs) != 1: raise`)."""
    for n in own_nodes(fn):
        test = n.test if isinstance(n, ast.Assert | ast.If) else None
        if (
            test is not None
            and isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Call)
            and dotted(test.left.func) == "len"
        ):
            if any(isinstance(c, ast.Constant) and c.value == 1 for c in test.comparators):
                return True
    return False


_LISTS = (
    "runtime_additional_information",
    "model_intermediate_buffer",
    "infos",
    "info_dicts",
    "request_infos",
    "runtime_info",
    "split_request",
    "per_request",
)


def _loops(fn: ast.AST):
    """(per-request list names, loops over them), memoized on the function node."""
    cached = getattr(fn, "_omni_loops", None)
    if cached is None:
        lists = per_request_lists(fn)
        if lists:
            counts = request_counts(fn, lists)
            cached = (
                lists,
                [n for n in own_nodes(fn) if isinstance(n, ast.For) and loop_binds_request(n, lists, counts)],
            )
        else:
            cached = (lists, [])
        fn._omni_loops = cached
    return cached


BATCH_TENSORS = frozenset({"input_ids", "inputs_embeds", "hidden_states", "positions", "model_outputs"})


@register
class NoFirstRequestOnly(Rule):
    """A batched output hook (`forward`, `make_omni_output`) that reads the first entry of the
    per-request list (`runtime_additional_information[0]`, `infos[0]`) instead of looping over it.

    Why: the runner passes one dict per scheduled request in batch order; taking `[0]` applies the
    first request's text, voice or stream state to every request of the batch. It passes every
    single-request test and breaks at `max_num_seqs > 1` (I4's concurrency layer).

    Fix: loop over the list and build one output entry per request; if the hook really supports a
    batch of one, assert `len(infos) == 1` so that the limitation is explicit.
    """

    id = "OMNI-I4-001"
    name = "no-first-request-only"
    invariant = "I4"
    severity = "error"
    needles = ("runtime_additional_information", "model_intermediate_buffer")
    VALID = [
        Valid(
            _m("""outs = []
for info in runtime_additional_information or []:
    outs.append(self.decode(info["codes"]))
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})""")
        ),
        Valid(
            _m("""infos = runtime_additional_information or []
assert len(infos) == 1, "batch of one"
wav = self.decode(infos[0]["codes"])
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [wav]})""")
        ),
    ]
    INVALID = [
        Invalid(
            _m("""outs, offset = [], 0
for info in runtime_additional_information or []:
    span = info["span"]
    outs.append(self.decode(input_ids[:span]))
    offset += span
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})"""),
            line=12,
            message="first request's rows",
        ),
        Invalid(
            _m("""info = kwargs.get("runtime_additional_information", [{}])[0]
wav = self.decode(info["codes"])
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [wav]})"""),
            line=9,
            message="first entry",
        ),
    ]

    def check(self, src: SourceFile):
        for fn in _hooks(src):
            lists, loops = _loops(fn.node)
            yield from self._first_slices(fn, loops)
            meta_reads = set()  # xs[0].device / .dtype / .shape: metadata every request shares
            for n in own_nodes(fn.node):
                if isinstance(n, ast.Attribute) and n.attr in ("device", "dtype", "shape", "ndim", "is_cuda"):
                    meta_reads.add(id(n.value))
            unguarded = set()
            for stmt, ctx in iter_stmts(fn.node.body):
                if not ctx.guarded:
                    unguarded |= {id(x) for e in stmt_exprs(stmt) for x in walk(e)}
            for n in own_nodes(fn.node):
                if not (isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value == 0):
                    continue
                if id(n) in meta_reads or id(n) not in unguarded:
                    continue
                base = n.value
                is_list = (isinstance(base, ast.Name) and base.id in lists) or (
                    isinstance(base, ast.Call)
                    and dotted(base.func).endswith(".get")
                    and base.args
                    and isinstance(base.args[0], ast.Constant)
                    and base.args[0].value in ("runtime_additional_information", "model_intermediate_buffer")
                )
                if is_list and isinstance(n.ctx, ast.Load) and not _len_one_guarded(fn.node, n):
                    yield Rule.at(
                        n,
                        f"`{fn.qualname}` reads the first entry of the per-request list; every other "
                        "request in the batch gets request 0's data",
                    )

    @staticmethod
    def _first_slices(fn, loops):
        """`input_ids[:n]` inside the per-request loop: the first request's rows for every request."""
        for loop in loops:
            for n in own_nodes(ast.Module(body=loop.body, type_ignores=[])):
                if not (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in BATCH_TENSORS):
                    continue
                s = n.slice
                if (
                    isinstance(s, ast.Slice)
                    and s.upper is not None
                    and (s.lower is None or (isinstance(s.lower, ast.Constant) and s.lower.value == 0))
                ):
                    yield Rule.at(
                        n,
                        f"`{n.value.id}[:...]` inside the per-request loop of `{fn.qualname}` takes the "
                        "first request's rows for every request; slice at the request's offset",
                    )


def _names_in(node: ast.AST) -> set[str]:
    """Free names an expression reads (names bound by its own comprehensions excluded)."""
    bound = {
        t.id for c in walk(node) if isinstance(c, ast.comprehension) for t in walk(c.target) if isinstance(t, ast.Name)
    }
    return {n.id for n in walk(node) if isinstance(n, ast.Name) and n.id not in bound}


def _output_exprs(fn: ast.AST) -> list[ast.AST]:
    """Expressions that make up what the hook emits: return values and OmniOutput(...) arguments."""
    out = []
    for n in own_nodes(fn):
        if isinstance(n, ast.Return) and n.value is not None:
            out.append(n.value)
        elif isinstance(n, ast.Call) and dotted(n.func).split(".")[-1] == "OmniOutput":
            out.append(n)
    return out


_META_NAME = re.compile(r"(^|_)(device|dtype|dev)$")


def _metadata(name: str, assign: ast.AST) -> bool:
    """A device/dtype picked from one request (`dev = codes.device`): the same for the whole batch."""
    value = getattr(assign, "value", None)
    return bool(_META_NAME.search(name)) or (isinstance(value, ast.Attribute) and value.attr in ("device", "dtype"))


def _root_name(target: ast.AST) -> str | None:
    """`mm` for `mm`, `mm["a"]["b"]`, `mm.setdefault("a", {})["b"]`, `mm.x`."""
    while True:
        if isinstance(target, ast.Name):
            return target.id
        if isinstance(target, ast.Subscript | ast.Attribute):
            target = target.value
        elif isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute):
            target = target.func.value
        else:
            return None


@register
class NoLastWinsOutput(Rule):
    """A batched output hook that assigns a value inside the per-request loop and emits it after
    the loop for the whole batch (the last request wins): returned, passed to `OmniOutput`, or
    stored into the emitted dict (`mm.setdefault("codes", {})["ref"] = [ref]`). Device/dtype
    metadata picked from one request is not reported.

    Why: with two concurrent requests, both receive the last request's audio (crosstalk) or one of
    them receives none; single-request tests cannot see it.

    Fix: append inside the loop (`outputs.append(wav)`) and emit the list, one entry per request
    in batch order.
    """

    id = "OMNI-I4-002"
    name = "no-last-wins-output"
    invariant = "I4"
    severity = "error"
    needles = ("runtime_additional_information", "model_intermediate_buffer")
    VALID = [
        Valid(
            _m("""outs = []
for info in runtime_additional_information or []:
    wav = self.decode(info["codes"])
    outs.append(wav)
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})""")
        ),
        Valid(
            _m("""codes, refs, dev = [], [], None
for info in runtime_additional_information or []:
    codes.append(info["codes"])
    refs.append(info.get("ref", torch.empty(0)))
    dev = info["codes"].device
mm = {"codes": {"audio": torch.cat(codes).to(dev)}}
mm.setdefault("codes", {})["ref"] = refs
return OmniOutput(text_hidden_states=None, multimodal_outputs=mm)"""),
            note="one entry per request; the device is the batch's",
        ),
    ]
    INVALID = [
        Invalid(
            _m("""wav = None
for info in runtime_additional_information or []:
    wav = self.decode(info["codes"])
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [wav]})"""),
            line=12,
            message="last request wins",
        ),
        Invalid(
            _m("""for info in runtime_additional_information or []:
    audio = self.decode(info["codes"])
outs = [audio for _ in runtime_additional_information]
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})"""),
            line=11,
            message="last request wins",
        ),
        Invalid(
            _m("""codes, ref = [], None
for info in runtime_additional_information or []:
    codes.append(info["codes"])
    if info.get("ref") is not None:
        ref = info["ref"]
mm = {"codes": {"audio": torch.cat(codes)}}
if ref is not None:
    mm.setdefault("codes", {})["ref"] = [ref]
return OmniOutput(text_hidden_states=None, multimodal_outputs=mm)"""),
            line=16,
            message="last request wins",
        ),
    ]

    def check(self, src: SourceFile):
        for fn in _hooks(src):
            _lists, loops = _loops(fn.node)
            if not loops:
                continue
            emitted = set()
            for e in _output_exprs(fn.node):
                emitted |= _names_in(e)
            # Names that feed an emitted name after the loop (`outputs = [audio for _ in infos]`).
            late = [n for n in own_nodes(fn.node) if isinstance(n, ast.Assign)]
            for _ in range(2):
                for n in late:
                    # `outputs = ...` and stores into an emitted container (`mm["codes"]["ref"] = [x]`,
                    # `mm.setdefault("codes", {})["ref"] = [x]`) both feed what is emitted.
                    if any(_root_name(t) in emitted for t in n.targets):
                        emitted |= _names_in(n.value)
            for loop in loops:
                loop_end = loop.end_lineno or loop.lineno
                assigned: dict[str, ast.AST] = {}
                for n in own_nodes(ast.Module(body=loop.body, type_ignores=[])):
                    if isinstance(n, ast.Assign):
                        for t in n.targets:
                            for x in t.elts if isinstance(t, ast.Tuple) else [t]:
                                if isinstance(x, ast.Name):
                                    assigned.setdefault(x.id, n)
                loop_vars = _names_in(loop.target)
                for name, node in assigned.items():
                    if name not in emitted or name in loop_vars or name.startswith("_") or _metadata(name, node):
                        continue
                    # Reassigned after the loop (e.g. the batch result) -> not last-wins.
                    later = [
                        n
                        for n in own_nodes(fn.node)
                        if isinstance(n, ast.Assign | ast.AugAssign | ast.For)
                        and getattr(n, "lineno", 0) > loop_end
                        and any(
                            name in _names_in(t)
                            if isinstance(n, ast.For) or isinstance(t, ast.Tuple | ast.List)
                            else isinstance(t, ast.Name) and t.id == name
                            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                        )
                    ]
                    used_after = [e for e in _output_exprs(fn.node) if e.lineno > loop_end and name in _names_in(e)]
                    used_after += [
                        n.value
                        for n in late
                        if n.lineno > loop_end
                        and name in _names_in(n.value)
                        and not any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
                        and any(_root_name(t) in emitted for t in n.targets)
                    ]
                    used_after.sort(key=lambda e: e.lineno)
                    if later or not used_after:
                        continue
                    yield Rule.at(
                        used_after[0],
                        f"`{name}` is assigned per request inside the loop at line "
                        f"{loop.lineno} and emitted once for the batch: the last request wins",
                    )


@register
class NoBreakAfterFirstRequest(Rule):
    """An unconditional `break` in the per-request loop of a batched output hook: only the first
    request of the batch is processed.

    Why: the other requests get no output for this step (gaps or a hang under concurrency).

    Fix: remove the `break`; use `continue` for requests with nothing to emit, and emit an empty
    entry for them.
    """

    id = "OMNI-I4-003"
    name = "no-break-after-first-request"
    invariant = "I4"
    severity = "error"
    needles = ("break",)
    VALID = [
        Valid(
            _m("""outs = []
for info in runtime_additional_information or []:
    if info.get("_is_dummy"):
        outs.append(torch.zeros(0))
        continue
    outs.append(self.decode(info["codes"]))
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})""")
        ),
    ]
    INVALID = [
        Invalid(
            _m("""outs = []
for info in runtime_additional_information or []:
    outs.append(self.decode(info["codes"]))
    break
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})"""),
            line=12,
            message="only the first request",
        ),
    ]

    def check(self, src: SourceFile):
        for fn in _hooks(src):
            _lists, loops = _loops(fn.node)
            for loop in loops:
                for stmt in loop.body:  # unconditional: directly in the loop body
                    if isinstance(stmt, ast.Break):
                        yield Rule.at(
                            stmt,
                            f"unconditional `break` in the per-request loop of `{fn.qualname}`: "
                            "only the first request of the batch is processed",
                        )


@register
class NoBatchWideFlag(Rule):
    """A batched output hook that folds per-request state into one model attribute: `self.flag =
    all(flags)`/`any(...)`, or a scalar `self.x = ...` assigned inside the per-request loop.

    Why: `compute_logits()` then finishes (or keeps alive) every request of the batch together:
    requests finish at the slowest peer's pace or are cut off by a faster one.

    Fix: keep one entry per request (`self._last_chunk_flags = flags`, a list in batch order) and
    index it per row where it is read.
    """

    id = "OMNI-I4-004"
    name = "no-batch-wide-flag"
    invariant = "I4"
    severity = "warning"
    needles = ("self.",)
    VALID = [
        Valid(
            _m("""flags = []
for info in runtime_additional_information or []:
    flags.append(bool(info.get("is_last")))
self._last_chunk_flags = flags
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [torch.zeros(0)] * len(flags)})""")
        ),
    ]
    INVALID = [
        Invalid(
            _m("""flags = []
for info in runtime_additional_information or []:
    flags.append(bool(info.get("is_last")))
self._ar_emit_stop_token = all(flags)
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [torch.zeros(0)] * len(flags)})"""),
            line=12,
            message="one flag for the whole batch",
        ),
        Invalid(
            _m("""flags = []
for info in runtime_additional_information or []:
    flags.append(bool(info.get("is_last")))
self._last_chunk_flags = [all(flags)] * len(flags)
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [torch.zeros(0)] * len(flags)})"""),
            line=12,
            message="one flag for the whole batch",
        ),
    ]

    def check(self, src: SourceFile):
        for fn in _hooks(src):
            lists, loops = _loops(fn.node)
            if not lists:
                continue
            in_loop = {id(n) for loop in loops for n in own_nodes(ast.Module(body=loop.body, type_ignores=[]))}
            guarded = {id(stmt) for stmt, ctx in iter_stmts(fn.node.body) if ctx.guarded}
            for n in own_nodes(fn.node):
                if id(n) in guarded:
                    continue  # `if not self._logged: self._logged = True`: once per process, not per batch
                if not isinstance(n, ast.Assign) or len(n.targets) != 1:
                    continue
                attr = is_self_attr(n.targets[0])
                if attr is None:
                    continue
                v = n.value
                folds = [c for c in walk(v) if isinstance(c, ast.Call) and dotted(c.func) in ("all", "any")]
                if folds:
                    yield Rule.at(
                        n,
                        f"`self.{attr} = ...{dotted(folds[0].func)}(...)` in `{fn.qualname}` keeps one flag "
                        "for the whole batch; keep one entry per request",
                    )
                elif id(n) in in_loop and _is_flag(v):
                    yield Rule.at(
                        n,
                        f"`self.{attr}` is set per request inside the loop of `{fn.qualname}`: one flag "
                        "for the whole batch, the last request wins",
                    )


def _is_flag(v: ast.AST) -> bool:
    if isinstance(v, ast.Constant) and isinstance(v.value, bool):
        return True
    if isinstance(v, ast.Compare | ast.BoolOp) or (isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.Not)):
        return True
    return isinstance(v, ast.Call) and dotted(v.func) == "bool"


__all__ = ["FUNC_TYPES"]
