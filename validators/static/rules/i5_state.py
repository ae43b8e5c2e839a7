"""I5 — per-request state is owned by the request: keyed by an id the target release really sets,
never by a constant, freed when the finish hook reports the request, keyed and freed by the same
id source, and never handed out as a view of a buffer the next step overwrites."""

from __future__ import annotations

import ast
import re

from omnitts.validators.static.buffers import (
    buffer_view_of,
    dict_values,
    elements,
    kept_past_step,
    persistent_buffers,
    strip_views,
)
from omnitts.validators.static.index import FUNC_TYPES, FuncInfo, dotted, is_self_attr, iter_stmts, walk
from omnitts.validators.static.request_state import (
    CONST,
    FINISH_HOOK,
    GLOBAL,
    OBJID,
    SCHED,
    SELF_ASSIGN,
    class_states,
    id_read,
    in_logging,
    is_const,
    own_exprs,
)
from omnitts.validators.static.rule import Invalid, Rule, Valid, register
from omnitts.validators.static.source import SourceFile

_HDR = """
import torch


class Talker(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._state = {}

    def preprocess(self, input_ids, input_embeds, **info):
"""

_FINISH = """
    def on_requests_finished(self, finished_req_ids):
        for rid in finished_req_ids:
            self._state.pop(rid, None)
"""


def _m(body: str, finish: str = _FINISH) -> str:
    return _HDR + "\n".join("        " + line for line in body.strip().splitlines()) + "\n" + finish


_ID_LITERAL = re.compile(r"""["'](request_id|req_id|global_request_id|_omni_req_id)["']""")


def _all_id_reads(src: SourceFile):
    for fn in src.index.functions.values():
        if not _ID_LITERAL.search(src.node_text(fn.node)):
            continue
        for stmt, _ctx in iter_stmts(fn.node.body):
            if isinstance(stmt, FUNC_TYPES):
                continue
            for n in (x for e in own_exprs(stmt) for x in walk(e)):
                r = id_read(n)
                if r is not None:
                    yield fn, stmt, n, r


def _primary_reads(stmt: ast.AST) -> set[int]:
    """ids of id reads that are fallbacks (not primary) in `a or b` / `.get(k, fallback)` chains."""
    fallbacks: set[int] = set()
    for n in (x for e in own_exprs(stmt) for x in walk(e)):
        if isinstance(n, ast.BoolOp):
            for v in n.values[1:]:
                fallbacks |= {id(x) for x in walk(v)}
        r = id_read(n)
        if r is not None and r[1] is not None:
            fallbacks |= {id(x) for x in walk(r[1])}
    return fallbacks


@register
class RequestIdKeySet(Rule):
    """Per-request state keyed by an id the target release never sets (`_omni_req_id` in every
    release; `request_id` before 0.20; `req_id` outside the 0.30 Model Runner V2 path), or keyed by
    `id(obj)` or a constant.

    The set of keys is read from the target tree (its runners, orchestrator and stage-input
    processors); without a tree, `request_id`, `req_id` and `global_request_id` count as set.
    Fallbacks after a real key (`a or b`) are not reported; OMNI-I5-002 covers constant fallbacks.

    Why: a key that is never set collapses every request onto one entry (or a fresh entry every
    step for `id(info)`): crosstalk, replayed audio, or state that is never found again.

    Fix: key by `request_id` (0.20+ runner, `preprocess` path; the same id `on_requests_finished`
    receives), `req_id` on the 0.30 Model Runner V2 path, or `global_request_id[0]` for
    orchestrator-level state that no finish hook frees.
    """

    id = "OMNI-I5-001"
    name = "request-id-key-set"
    invariant = "I5"
    severity = "error"
    needles = ("_id", "id(")
    VALID = [
        Valid(
            _m("""key = str(info["request_id"])
self._state[key] = input_ids
return input_ids, input_embeds, {}""")
        )
    ]
    INVALID = [
        Invalid(
            _m("""key = str(info.get("_omni_req_id"))
self._state[key] = input_ids
return input_ids, input_embeds, {}"""),
            line=11,
            message="never sets",
        ),
        Invalid(
            _m("""self._state[id(info)] = input_ids
return input_ids, input_embeds, {}"""),
            line=11,
            message="`id(...)`",
        ),
    ]

    def check(self, src: SourceFile):
        keys = src.facts.request_id_keys
        for _fn, stmt, node, (key, _default) in _all_id_reads(src):
            if key in keys or id(node) in _primary_reads(stmt) or in_logging(src, node):
                continue
            where = f"release {src.facts.version}" if src.facts.version else "any released runner"
            yield Rule.at(
                node,
                f"reads request-id key `{key}`, which {where} never sets "
                f"(set: {', '.join(keys)}); state keyed by it collapses across requests",
            )
        for cs in class_states(src):
            for d, ops in cs.ops.items():
                for fn, node, key, srcs in ops.inserts:
                    if (
                        srcs
                        and srcs <= {OBJID, CONST}
                        and (OBJID in srcs or not isinstance(key, ast.Constant) or cs.per_request(d))
                    ):
                        what = "`id(...)` of a per-step object" if OBJID in srcs else "a constant"
                        yield Rule.at(node, f"`self.{d}` is keyed by {what} in `{fn.qualname}`, not by a request id")


@register
class NoConstantIdFallback(Rule):
    """A request-id lookup that falls back to a constant: `info.get("request_id", "default")`,
    `info.get("x") or "0"`, `str(info.get("_omni_req_id", "0"))`.

    Why: when the key is missing (another runner path, a release that writes a different key, a
    dummy run) every request shares the constant's entry: audio crosstalk that only shows under
    load (I5). 0.30's Model Runner V2 writes `req_id`, not `request_id`.

    Fix: look up the keys the target sets in order and fail loudly when none is present
    (`raise KeyError`), or skip state for `_is_dummy` requests explicitly.
    """

    id = "OMNI-I5-002"
    name = "no-constant-id-fallback"
    invariant = "I5"
    severity = "error"
    needles = ("_id",)
    VALID = [
        Valid(
            _m("""key = info.get("request_id")
if key is None:
    raise KeyError("request_id missing")
self._state[key] = input_ids
return input_ids, input_embeds, {}""")
        )
    ]
    INVALID = [
        Invalid(
            _m("""key = info.get("request_id", "default")
self._state[key] = input_ids
return input_ids, input_embeds, {}"""),
            line=11,
            message="falls back to",
        ),
        Invalid(
            _m("""key = str(info.get("request_id") or "0")
self._state[key] = input_ids
return input_ids, input_embeds, {}"""),
            line=11,
            message="falls back to",
        ),
    ]

    def check(self, src: SourceFile):
        seen = set()
        for _fn, stmt, node, (key, default) in _all_id_reads(src):
            if in_logging(src, node):
                continue
            const = None
            if is_const(default):
                const = default.value
            elif default is not None and isinstance(default, ast.BoolOp) and is_const(default.values[-1]):
                const = default.values[-1].value
            else:
                for n in walk(stmt):
                    if (
                        isinstance(n, ast.BoolOp)
                        and isinstance(n.op, ast.Or)
                        and any(x is node for v in n.values[:-1] for x in walk(v))
                    ):
                        if is_const(n.values[-1]):
                            const = n.values[-1].value
            if const is not None and (stmt.lineno, key) not in seen:
                seen.add((stmt.lineno, key))
                yield Rule.at(
                    node,
                    f"request-id lookup `{key}` falls back to the constant {const!r}: requests without the "
                    "key share one state entry",
                )


@register
class FreeOnFinish(Rule):
    """Per-request state (a dict on the model keyed by a request id) that `on_requests_finished`
    never frees: the class has no finish hook, or the hook (directly, through helpers, or through a
    deferred-cleanup set it fills) never pops/deletes/clears that dict.

    Popping on the last chunk inside `forward()` is not enough: aborted, cancelled and preempted
    requests never reach their last chunk. Size-bounded caches (`popitem`, `len(self.d)` checks)
    are not reported.

    Why: the entry (generators, codec windows, KV state, temp files) leaks for every aborted
    request, and a reused id would resume a stale stream.

    Fix: implement `on_requests_finished(self, finished_req_ids)` and free every per-request entry
    there, keyed by the ids it receives.
    """

    id = "OMNI-I5-003"
    name = "free-on-finish"
    invariant = "I5"
    severity = "error"
    needles = ("self._", "self.")
    VALID = [
        Valid(
            _m("""self._state[info["request_id"]] = input_ids
return input_ids, input_embeds, {}""")
        ),
        Valid(
            _m(
                """self._state[info["request_id"]] = input_ids
while len(self._state) > 64:
    self._state.popitem()
return input_ids, input_embeds, {}""",
                finish="",
            ),
            note="size-bounded (LRU) cache",
        ),
        Valid(
            _m(
                """self._state[info["request_id"]] = input_ids
return input_ids, input_embeds, {}""",
                finish="""
    def on_requests_finished(self, finished_req_ids):
        state = self._state
        for rid in finished_req_ids:
            state.pop(rid, None)
""",
            ),
            note="freed through a local bound to the dict",
        ),
    ]
    INVALID = [
        Invalid(
            _m(
                """self._state[info["request_id"]] = input_ids
return input_ids, input_embeds, {}""",
                finish="",
            ),
            line=11,
            message="never frees",
        ),
        Invalid(
            _m(
                """state = self._state
state[info["request_id"]] = input_ids
return input_ids, input_embeds, {}""",
                finish="",
            ),
            line=12,
            message="never frees",
        ),
    ]

    def check(self, src: SourceFile):
        for cs in class_states(src):
            has_hook = src.index.method(cs.cls.name, FINISH_HOOK) is not None
            for d, ops in cs.ops.items():
                if not ops.inserts or ops.bounded or not cs.per_request(d):
                    continue
                if any(f.qualname in cs.finish for f, _n in ops.frees):
                    continue
                fn, node, _k, _s = ops.inserts[0]
                why = (
                    "the class has no `on_requests_finished`"
                    if not has_hook
                    else "`on_requests_finished` never frees it"
                )
                popped = " (it is only freed in-line, which aborted requests never reach)" if ops.frees else ""
                yield Rule.at(node, f"per-request state `self.{d}` never frees on finish: {why}{popped}")


@register
class SameIdSourceForInsertAndFree(Rule):
    """Per-request state inserted under one id source and freed under another: e.g. inserted under
    `global_request_id` (the orchestrator's external id) but freed in `on_requests_finished`, which
    receives the scheduler's ids (`request_id`/`req_id`).

    Why: the free never matches, so every finished request leaks its entry (and its generator's
    `finally` never runs); `str()` of the one-element `global_request_id` list does not even equal
    the external id.

    Fix: key the state by the id the finish hook receives (`request_id` from the runner, `req_id` on
    MRv2), or free orchestrator-keyed state where that id is known.
    """

    id = "OMNI-I5-004"
    name = "same-id-source-insert-free"
    invariant = "I5"
    severity = "error"
    needles = ("global_request_id",)
    VALID = [
        Valid(
            _m("""self._state[info["request_id"]] = input_ids
return input_ids, input_embeds, {}""")
        )
    ]
    INVALID = [
        Invalid(
            _m("""key = str(info.get("global_request_id"))
self._state[key] = input_ids
return input_ids, input_embeds, {}"""),
            line=12,
            message="global_request_id",
        ),
    ]

    def check(self, src: SourceFile):
        for cs in class_states(src):
            for d, ops in cs.ops.items():
                finish_frees = [f for f, _n in ops.frees if f.qualname in cs.finish]
                if not finish_frees:
                    continue
                for fn, node, _key, srcs in ops.inserts:
                    if srcs and GLOBAL in srcs and SCHED not in srcs:
                        yield Rule.at(
                            node,
                            f"`self.{d}` is inserted under `global_request_id` in `{fn.qualname}` but freed "
                            f"in `{finish_frees[0].qualname}` with the scheduler ids `on_requests_finished` "
                            "receives: the free never matches",
                        )
                        break


@register
class NoBufferViewOutput(Rule):
    """A view of a persistent buffer (a tensor allocated once on the model: `register_buffer`,
    `self.buf = torch.zeros(...)`) emitted as a per-request output or stored as per-request state
    without `.clone()`: `outputs.append(self.out_buf[:n])`, `{"model_outputs": self.wav_buf}`.

    Why: the output processor keeps each step's tensors until the request finishes; the next step
    (or another request in the batch, or the next CUDA-graph replay) overwrites the buffer, so
    earlier chunks silently change: corrupted or repeated audio under load.

    Fix: emit `self.out_buf[:n].clone()` (one copy per step), or allocate a fresh tensor per output.
    """

    id = "OMNI-I5-005"
    name = "no-buffer-view-output"
    invariant = "I5"
    severity = "error"
    needles = ("self.",)
    _B = '''
import torch
from vllm_omni.model_executor.models.output_templates import OmniOutput


class Code2Wav(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("wav_buf", torch.zeros(4, 48000), persistent=False)

    def forward(self, input_ids, runtime_additional_information=None, **kwargs):
        """Delta audio."""
        outs = []
        for i, info in enumerate(runtime_additional_information or []):
            n = self._decode_into(i, info)
{line}
        return OmniOutput(text_hidden_states=None, multimodal_outputs={{"model_outputs": outs}})
'''
    _R = """
import torch


class CodePredictor(torch.nn.Module):
    def forward(self, hidden, state):
        codes, stop = self.predict(hidden)
        state.last_codes = codes[0]
        return stop

    def predict(self, hidden):
        loop = self._static_loops[hidden.shape[0]]
        loop.hidden.copy_(hidden)
        loop.graph.replay()
        return {ret}
"""
    VALID = [
        Valid(_B.format(line="            outs.append(self.wav_buf[i, :n].clone())")),
        Valid(_R.format(ret="loop.codes.clone(), loop.stop.clone()")),
    ]
    INVALID = [
        Invalid(
            _B.format(line="            outs.append(self.wav_buf[i, :n])"), line=16, message="view of persistent buffer"
        ),
        Invalid(_R.format(ret="loop.codes, loop.stop.clone()"), line=15, message="replays a CUDA graph"),
    ]

    def check(self, src: SourceFile):
        if ".replay()" in src.text:
            yield from self._graph_returns(src)
        for _cname, cls in src.index.classes.items():
            buffers = persistent_buffers(cls)
            if not buffers:
                continue
            for fn in cls.methods.values():
                text = src.node_text(fn.node)
                if ("OmniOutput" not in text and "model_outputs" not in text) or fn.qualname not in src.index.per_step:
                    continue
                yield from self._check_fn(fn, buffers)

    @staticmethod
    def _graph_returns(src: SourceFile):
        """A function that replays a CUDA graph and returns the graph's static output buffers
        (`holder.out`) without a copy, whose in-file caller keeps a view of them past the step:
        stores it on a request's state or emits it. The next replay overwrites what was kept."""
        index = src.index
        candidates: dict[str, list[ast.AST]] = {}
        for fn in index.functions.values():
            text = src.node_text(fn.node)
            if ".replay()" not in text:
                continue
            copied = {
                dotted(n.func.value)
                for n in walk(fn.node)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "copy_"
            }
            rets = []
            for stmt, _ctx in iter_stmts(fn.node.body):
                if not isinstance(stmt, ast.Return) or stmt.value is None:
                    continue
                for e in stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]:
                    base = strip_views(e)
                    if (
                        isinstance(base, ast.Attribute)
                        and not isinstance(base.value, ast.Call)
                        and dotted(base) not in copied
                    ):
                        rets.append(e)
            if rets:
                candidates[fn.qualname] = rets
        if not candidates:
            return
        for caller in index.functions.values():
            for call, _loop, _guarded in caller.calls:
                target = index.resolve(caller, call)
                if target is None or target.qualname not in candidates:
                    continue
                kept = kept_past_step(caller.node, call)
                if kept is None:
                    continue
                for e in candidates[target.qualname]:
                    yield Rule.at(
                        e,
                        f"`{target.qualname}` replays a CUDA graph and returns its static buffer "
                        f"`{dotted(strip_views(e))}` without `.clone()`; `{caller.qualname}` keeps a view "
                        f"of it (line {kept}), which the next replay overwrites",
                    )
                del candidates[target.qualname]
                break

    def _check_fn(self, fn: FuncInfo, buffers: set[str]):
        views: set[str] = set()
        stmts = [s for s, _c in iter_stmts(fn.node.body)]
        for s in stmts:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                if buffer_view_of(s.value, buffers, views):
                    views.add(s.targets[0].id)
        emitted: set[str] = set()
        sinks: list[ast.AST] = []
        for s in stmts:
            for n in walk(s) if isinstance(s, ast.Return | ast.Expr | ast.Assign) else []:
                if isinstance(n, ast.Call) and dotted(n.func).split(".")[-1] == "OmniOutput":
                    for kw in n.keywords:
                        if kw.arg == "multimodal_outputs":
                            emitted |= {x.id for x in walk(kw.value) if isinstance(x, ast.Name)}
                            sinks += dict_values(kw.value)
                elif isinstance(n, ast.Dict):
                    for k, v in zip(n.keys, n.values, strict=False):
                        if isinstance(k, ast.Constant) and k.value in ("model_outputs", "audio"):
                            emitted |= {x.id for x in walk(v) if isinstance(x, ast.Name)}
                            sinks += elements(v)
        for s in stmts:
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute):
                call = s.value
                owner = call.func.value
                if (
                    call.func.attr in ("append", "insert", "extend")
                    and isinstance(owner, ast.Name)
                    and owner.id in emitted
                ):
                    sinks += call.args[-1:]
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in emitted:
                        sinks.append(s.value)
        seen = set()
        for sink in sinks:
            buf = buffer_view_of(sink, buffers, views)
            if buf is not None and id(sink) not in seen:
                seen.add(id(sink))
                yield Rule.at(
                    sink,
                    f"emits a view of persistent buffer `self.{buf}` in `{fn.qualname}`: the next step "
                    "overwrites it; emit `.clone()`",
                )


@register
class NoScalarRequestState(Rule):
    """Per-request state kept in a single model attribute: a streaming generator stored as
    `self._gen = self._make_stream(info)`, or `self.x = <a value derived from one request's data>`:
    inside the per-request loop of a batched hook (or a helper it passes the request to), or in a
    per-request hook (`preprocess`/`postprocess`, whose keywords are one request's dict), when the
    attribute is read again elsewhere (another method, or this one before the write: the next step).

    What is per-request data follows the data, not names: the runner's per-request list and its
    entries (knowledge layer), what is computed from them, and what helpers receive them as.
    Device/dtype picked from a request, and flags in a batched hook's loop (OMNI-I4-004), are not
    reported.

    Why: with two concurrent requests the attribute holds whichever request ran last: the other
    request resumes someone else's stream, voice or codec window (crosstalk, I5). Single-request
    tests and the I5 leak checks cannot see it; only concurrent requests do.

    Fix: keep it in a dict keyed by the request id (`self._streams[request_key] = ...`) and free
    it in `on_requests_finished`.
    """

    id = "OMNI-I5-006"
    name = "no-scalar-request-state"
    invariant = "I5"
    severity = "error"
    needles = ("self.",)
    _G = '''
import torch


class Model(torch.nn.Module):
    def _stream(self, info):
        yield torch.zeros(4), True

    def forward(self, input_ids, runtime_additional_information=None, **kwargs):
        """Delta audio."""
        for info in runtime_additional_information or []:
{line}
        return input_ids
'''
    # a plain attribute holding one request's value, read back by another method (the case)
    _B = '''
import torch


class Code2Wav(torch.nn.Module):
    def forward(self, input_ids, runtime_additional_information=None, **kwargs):
        """Delta audio."""
        outs = []
        for entry in runtime_additional_information or []:
            voice = entry.get("voice")
{line}
            outs.append(self.codec(entry["codes"]))
        return outs

    def compute_logits(self, hidden_states, sampling_metadata=None):
        return self.head(hidden_states, {ref})
'''
    # the same request's context handed down to a helper within its own iteration: not kept state
    _T = '''
import torch


class Code2Wav(torch.nn.Module):
    def forward(self, input_ids, runtime_additional_information=None, **kwargs):
        """Delta audio."""
        outs = []
        for entry in runtime_additional_information or []:
            self._current = entry
            outs.append(self._decode())
        return outs

    def _decode(self):
        return self.codec(self._current["codes"])
'''
    _P = """
import torch


class Talker(torch.nn.Module):
    def preprocess(self, input_ids, input_embeds, **req):
{line}
        return input_ids, input_embeds, {{}}

    def compute_logits(self, hidden_states, sampling_metadata=None):
        return self.head(hidden_states) / {ref}
"""
    VALID = [
        Valid(_G.format(line="            self._streams[info['request_id']] = self._stream(info)")),
        Valid(
            _B.format(line="            self._voices[entry['request_id']] = voice", ref="self._voices"),
            note="a container keyed by the request id",
        ),
        Valid(
            _B.format(line="            self._dev = entry['codes'].device", ref="self._dev"),
            note="device metadata, the same for the whole batch",
        ),
        Valid(
            _P.format(line="        self.scale = 1.0", ref="self.scale"),
            note="not request data",
        ),
        Valid(_T, note="read only by a helper the hook calls within the same request's iteration"),
    ]
    INVALID = [
        Invalid(_G.format(line="            self._gen = self._stream(info)"), line=12, message="generator"),
        Invalid(
            _G.format(line="            left = self._codec_window\n            self._codec_window = info.get('codes')"),
            line=13,
            message="last request",
        ),
        Invalid(
            _B.format(line="            self.speaker = voice", ref="self.speaker"),
            line=11,
            message="last request",
        ),
        Invalid(
            _P.format(line="        self.temperature = float(req.get('temperature', 1.0))", ref="self.temperature"),
            line=7,
            message="one request's data",
        ),
    ]

    def check(self, src: SourceFile):
        index = src.index
        for cls in index.classes.values():
            for fn in cls.methods.values():
                if fn.qualname not in index.per_step or not SELF_ASSIGN.search(src.node_text(fn.node)):
                    continue
                for stmt, _ctx in iter_stmts(fn.node.body):
                    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
                        continue
                    attr = is_self_attr(stmt.targets[0])
                    v = stmt.value
                    if attr is not None and isinstance(v, ast.Call):
                        target = index.resolve(fn, v)
                        if target is not None and target.is_generator:
                            yield Rule.at(
                                stmt,
                                f"`self.{attr}` holds a streaming generator for one request; concurrent "
                                "requests overwrite it (key it by request id)",
                            )
        yield from request_attr_writes(src)


def request_attr_writes(src: SourceFile):
    """`self.x = <per-request data>` findings (see NoScalarRequestState)."""
    from omnitts.validators.static.request_data import per_request_writes

    for fn, stmt, attr, in_loop in per_request_writes(src):
        where = (
            f"inside the per-request loop of `{fn.qualname}`: the last request wins for the whole batch"
            if in_loop
            else f"in `{fn.qualname}`, which the runner calls for each request: the next request overwrites it"
        )
        yield Rule.at(stmt, f"`self.{attr}` is set from one request's data {where}")
