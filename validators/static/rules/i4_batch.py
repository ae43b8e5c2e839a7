"""I4 (static part) — batched output hooks emit one entry per request, built inside the
per-request loop; what a `max_num_seqs>1` smoke test would catch, found before it runs.

The batched hooks and the per-request lists are the knowledge layer's and the data's
(`batch.RequestFacts`): a helper a hook hands the list to is checked like the hook, and a helper
that stores a value into the hook's output (or returns it) emits it like the hook."""

from __future__ import annotations

import ast

from omnitts.validators.static.batch import (
    batched_hooks,
    loop_binds_request,
    loop_request_vars,
    own_nodes,
    request_counts,
    request_facts,
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
    """The batched hooks (knowledge layer): the runner's per-request list reaches them every step."""
    return batched_hooks(src.index)


def _seeing_lists(src: SourceFile):
    """(function, its per-request lists, whether it is a batched hook) for every function a batched hook
    reaches that holds a per-request list (its own or one a caller passed in)."""
    facts = request_facts(src)
    hooks = {f.qualname for f in facts.hooks}
    for fn in facts.reach:
        lists = facts.of(fn)
        if lists:
            yield fn, lists, fn.qualname in hooks


def _uniformity_check(fn: ast.AST, node: ast.Subscript) -> bool:
    """`first = xs[0]` compared with every other entry (`all(x == first for x in xs[1:])`): the function
    checks that the batch agrees, it does not use request 0 for all."""
    name = None
    for n in own_nodes(fn):
        if (
            isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
            and any(x is node for x in walk(n.value))
        ):
            name = n.targets[0].id
    if name is None or not isinstance(node.value, ast.Name):
        return False
    for n in own_nodes(fn):
        if isinstance(n, ast.GeneratorExp | ast.ListComp) and any(
            isinstance(g.iter, ast.Subscript)
            and isinstance(g.iter.value, ast.Name)
            and g.iter.value.id == node.value.id
            for g in n.generators
        ):
            if any(isinstance(c, ast.Compare) and any(isinstance(x, ast.Name) and x.id == name for x in walk(c))
                   for c in walk(n.elt)):  # fmt: skip
                return True
    return False


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


def _loops(src: SourceFile, fn) -> tuple[set[str], list[ast.AST]]:
    """(per-request list names, loops over them) of a function a batched hook reaches."""
    lists = request_facts(src).of(fn)
    if not lists:
        return lists, []
    counts = request_counts(fn.node, lists)
    loops = [
        n for n in own_nodes(fn.node) if isinstance(n, ast.For | ast.While) and loop_binds_request(n, lists, counts)
    ]
    return lists, loops


def _batch_tensors(src: SourceFile, fn) -> set[str]:
    """The hook's batched device tensors (its device arguments, knowledge layer) and their reshapes."""
    hook = src.index.hook(fn)
    if hook is None:
        return set()
    positional = [a.arg for a in [*fn.node.args.posonlyargs, *fn.node.args.args]][1:]
    out = {positional[i] for i in hook.device_args if i < len(positional)}
    for n in own_nodes(fn.node):
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            v = n.value
            while isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in _SAME_ROWS:
                v = v.func.value
            if isinstance(v, ast.Name) and v.id in out:
                out.add(n.targets[0].id)
    return out


_SAME_ROWS = frozenset({"reshape", "view", "to", "flatten", "contiguous", "long", "int", "float", "detach", "clone"})


@register
class NoFirstRequestOnly(Rule):
    """A batched output hook (`forward`, `make_omni_output`), or a helper it hands the per-request list
    to, that reads the first entry of the list (`runtime_additional_information[0]`, `infos[0]`)
    instead of looping over it; or that slices each request's rows of the batch by boundaries
    (`ids[offsets[i]:offsets[i + 1]]`) which one path sets to a single segment (`offsets = [0, total]`):
    request 0 then receives every request's rows.

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
        Invalid(
            _m("""infos = runtime_additional_information or []
counts = kwargs.get("num_scheduled_tokens")
if isinstance(counts, list) and len(counts) == len(infos):
    bounds = [0]
    for n in counts:
        bounds.append(bounds[-1] + int(n))
else:
    bounds = [0, int(input_ids.shape[0])]
outs = []
for i, info in enumerate(infos):
    if i + 1 >= len(bounds):
        break
    outs.append(self.decode(input_ids[bounds[i] : bounds[i + 1]]))
return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs})"""),
            line=16,
            message="single segment",
        ),
    ]

    def check(self, src: SourceFile):
        keys = request_facts(src).ctx.keys
        for fn, lists, is_hook in _seeing_lists(src):
            _lists, loops = _loops(src, fn)
            if is_hook:
                tensors = _batch_tensors(src, fn)
                yield from self._first_slices(fn, loops, tensors)
                yield from self._one_segment(src, fn, loops, tensors)
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
                    and base.args[0].value in keys
                )
                if (
                    is_list
                    and isinstance(n.ctx, ast.Load)
                    and not _len_one_guarded(fn.node, n)
                    and not _uniformity_check(fn.node, n)
                ):
                    yield Rule.at(
                        n,
                        f"`{fn.qualname}` reads the first entry of the per-request list; every other "
                        "request in the batch gets request 0's data",
                    )

    @staticmethod
    def _one_segment(src: SourceFile, fn, loops, batch_tensors: set[str]):
        """`rows[b[i] : b[i + 1]]` in the per-request loop, where `b` is (on some path) a two-entry literal
        `[0, total]`, or what an in-file helper returns as one: one segment for the whole batch."""
        bounds: set[str] = set()
        for loop in loops:
            for n in own_nodes(loop):
                if (
                    isinstance(n, ast.Subscript)
                    and isinstance(n.value, ast.Name)
                    and n.value.id in batch_tensors
                    and isinstance(n.slice, ast.Slice)
                ):
                    lo, hi = n.slice.lower, n.slice.upper
                    if (
                        isinstance(lo, ast.Subscript)
                        and isinstance(hi, ast.Subscript)
                        and isinstance(lo.value, ast.Name)
                        and isinstance(hi.value, ast.Name)
                        and lo.value.id == hi.value.id
                        and isinstance(hi.slice, ast.BinOp)
                        and isinstance(hi.slice.op, ast.Add)
                    ):
                        bounds.add(lo.value.id)
        if not bounds:
            return
        for n in own_nodes(fn.node):
            if not (isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in bounds for t in n.targets)):
                continue
            for lit in _two_entry_values(src, fn, n.value):
                yield Rule.at(
                    lit,
                    f"`{fn.qualname}` slices each request's rows by boundaries that this path sets to a single "
                    "segment for the whole batch: request 0 gets every request's rows, the others none",
                )

    @staticmethod
    def _first_slices(fn, loops, batch_tensors: set[str]):
        """`input_ids[:n]` inside the per-request loop: the first request's rows for every request."""
        for loop in loops:
            for n in own_nodes(loop):
                if not (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in batch_tensors):
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


def _two_entry_values(src: SourceFile, fn, value: ast.AST) -> list[ast.AST]:
    """Two-entry list/tuple literals a value is (directly, or as what the in-file helper it calls returns)."""
    if (
        isinstance(value, ast.List | ast.Tuple)
        and len(value.elts) == 2
        and not any(isinstance(e, ast.Starred) for e in value.elts)
    ):
        return [value]
    if isinstance(value, ast.Call):
        target = src.index.resolve(fn, value)
        if target is not None and target is not fn:
            out = []
            local: dict[str, list[ast.AST]] = {}
            for n in own_nodes(target.node):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    local.setdefault(n.targets[0].id, []).append(n.value)
            for n in own_nodes(target.node):
                if isinstance(n, ast.Return) and n.value is not None:
                    vals = local.get(n.value.id, []) if isinstance(n.value, ast.Name) else [n.value]
                    out += [v for v in vals if isinstance(v, ast.List | ast.Tuple) and len(v.elts) == 2]
            return out
    return []


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


def _metadata(name: str, assign: ast.AST) -> bool:
    """A device/dtype picked from one request (`dev = codes.device`): the same for the whole batch."""
    value = getattr(assign, "value", None)
    parts = [value]
    if isinstance(value, ast.IfExp):
        parts = [value.body, value.orelse]
    elif isinstance(value, ast.BoolOp):
        parts = list(value.values)
    return (
        bool(parts)
        and all(
            (isinstance(p, ast.Attribute) and p.attr in ("device", "dtype"))
            or (isinstance(p, ast.Constant) and p.value is None)
            for p in parts
        )
        and any(isinstance(p, ast.Attribute) for p in parts)
    )


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
            lists, loops = _loops(src, fn)
            if not loops:
                continue
            emitted = set()
            for e in _output_exprs(fn.node):
                emitted |= _names_in(e)
            # Names that feed an emitted name after the loop (`outputs = [audio for _ in infos]`).
            late = [n for n in own_nodes(fn.node) if isinstance(n, ast.Assign)]
            calls = _helper_emissions(src, fn)
            for _ in range(3):
                for n in late:
                    # `outputs = ...` and stores into an emitted container (`mm["codes"]["ref"] = [x]`,
                    # `mm.setdefault("codes", {})["ref"] = [x]`) both feed what is emitted.
                    if any(_root_name(t) in emitted for t in n.targets):
                        emitted |= _names_in(n.value)
                for call, feeds in calls:
                    # a helper that stores its argument into an emitted container, or whose result is emitted
                    for names, into in feeds:
                        if into is None and _result_emitted(call, fn.node, emitted) or into in emitted:
                            emitted |= names
            for loop in loops:
                loop_end = loop.end_lineno or loop.lineno
                assigned: dict[str, ast.AST] = {}
                for n in own_nodes(loop):
                    if isinstance(n, ast.Assign):
                        for t in n.targets:
                            for x in t.elts if isinstance(t, ast.Tuple) else [t]:
                                if isinstance(x, ast.Name):
                                    assigned.setdefault(x.id, n)
                loop_vars = loop_request_vars(loop, lists)
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
                    used_after += [
                        call
                        for call, feeds in calls
                        if call.lineno > loop_end
                        and any(
                            name in names
                            and (into in emitted or (into is None and _result_emitted(call, fn.node, emitted)))
                            for names, into in feeds
                        )
                    ]
                    used_after.sort(key=lambda e: e.lineno)
                    if later or not used_after:
                        continue
                    yield Rule.at(
                        used_after[0],
                        f"`{name}` is assigned per request inside the loop at line "
                        f"{loop.lineno} and emitted once for the batch: the last request wins",
                    )


def _helper_emissions(src: SourceFile, fn) -> list[tuple[ast.Call, list[tuple[set[str], str | None]]]]:
    """In-file helper calls of a hook that pass values on to what the hook emits: (call, [(names of an
    argument, the caller's name whose container the helper stores it into, or None when the helper returns
    it)])."""
    from omnitts.validators.static.tensors import bind_args

    index = src.index
    out = []
    for n in own_nodes(fn.node):
        if not isinstance(n, ast.Call):
            continue
        target = index.resolve(fn, n)
        if target is None or target is fn:
            continue
        sinks = _sinks(src, target)
        if not sinks:
            continue
        bound = dict(bind_args(index, target, n))
        feeds = []
        for param, arg in bound.items():
            for sink in sinks.get(param, ()):
                if sink == "return":
                    feeds.append((_names_in(arg), None))
                else:
                    into = bound.get(sink)
                    if isinstance(into, ast.Name):
                        feeds.append((_names_in(arg), into.id))
        if feeds:
            out.append((n, feeds))
    return out


def _sinks(src: SourceFile, fn) -> dict[str, set[str]]:
    """Where a helper's parameters go: "return" (into its return value) or the name of another parameter
    whose container it stores them into (`q["k"] = [p]`, `q.setdefault("k", {})["r"] = p`, `q.append(p)`);
    through local names assigned from them. Cached per function."""
    cache = src.__dict__.setdefault("_i4_sinks", {})
    if fn.qualname in cache:
        return cache[fn.qualname]
    params = [a.arg for a in [*fn.node.args.posonlyargs, *fn.node.args.args, *fn.node.args.kwonlyargs]]
    carries: dict[str, set[str]] = {p: {p} for p in params}  # local name -> parameters its value holds
    nodes = own_nodes(fn.node)
    for _ in range(2):
        for n in nodes:
            if isinstance(n, ast.Assign):
                held = set().union(*(carries.get(x, set()) for x in _names_in(n.value)))
                for t in n.targets:
                    if isinstance(t, ast.Name) and held:
                        carries.setdefault(t.id, set()).update(held)
    out: dict[str, set[str]] = {}

    def feed(value: ast.AST, sink: str) -> None:
        for x in _names_in(value):
            for p in carries.get(x, ()):
                if p != sink:
                    out.setdefault(p, set()).add(sink)

    for n in nodes:
        if isinstance(n, ast.Return) and n.value is not None:
            feed(n.value, "return")
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                root = _root_name(t)
                if root in params and not isinstance(t, ast.Name):
                    feed(n.value, root)
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("append", "extend", "insert", "update", "setdefault")
            and _root_name(n.func.value) in params
        ):
            for a in n.args[1:] if n.func.attr in ("insert", "setdefault") else n.args:
                feed(a, _root_name(n.func.value))
    cache[fn.qualname] = out
    return out


def _result_emitted(call: ast.Call, fn: ast.AST, emitted: set[str]) -> bool:
    """The call's value is part of what the hook emits (inside a return/OmniOutput, or bound to an emitted
    name)."""
    for e in _output_exprs(fn):
        if any(x is call for x in walk(e)):
            return True
    for n in own_nodes(fn):
        if isinstance(n, ast.Assign) and any(x is call for x in walk(n.value)):
            return any(_root_name(t) in emitted for t in n.targets)
    return False


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
        for fn, _lists, _is_hook in _seeing_lists(src):
            _lists, loops = _loops(src, fn)
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
        for fn, _lists, _is_hook in _seeing_lists(src):
            lists, loops = _loops(src, fn)
            if not lists:
                continue
            in_loop = {id(n) for loop in loops for n in own_nodes(loop)}
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
