"""I1 — streaming output contract: forward() says delta or cumulative, every return path emits the
audio key, and the target's output consolidation concatenates that key instead of skipping it."""

from __future__ import annotations

import ast
import re

from omnitts.knowledge.treefacts import CONSOLIDATION_FILES
from omnitts.validators.static.index import FUNC_TYPES, dotted, iter_stmts, walk
from omnitts.validators.static.rule import Invalid, Report, Rule, Valid, register
from omnitts.validators.static.source import SourceFile

AUDIO_KEYS = frozenset({"model_outputs", "audio"})
# Keys that carry no payload: a return emitting only these dropped the step's audio. A return with
# other payload keys (codes, latents) is another stage's output sharing the class, not a dropped step.
META_KEYS = frozenset({"sr", "sample_rate", "audio_sample_rate", "meta", "generated_len", "request_id", "finished"})
OUTPUT_HOOKS = ("forward", "make_omni_output")
_SEMANTICS = re.compile(r"\b(delta|cumulative)\b", re.I)
UNKNOWN = None


def _dict_keys(node: ast.AST) -> set[str] | None:
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):  # {**other}: keys not known statically
            return UNKNOWN
        return {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    if isinstance(node, ast.Call) and dotted(node.func) == "dict" and not node.args:
        return {k.arg for k in node.keywords if k.arg}
    if isinstance(node, ast.Constant) and node.value is None:
        return set()
    return UNKNOWN


def _name_keys(fn: ast.AST, name: str) -> set[str] | None:
    """Keys a dict variable can hold: its literal assignments plus `name["k"] = ...`/`update`."""
    keys: set[str] = set()
    seen_literal = False
    for stmt, _ctx in iter_stmts(fn.body):
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id == name:
                    k = _dict_keys(stmt.value)
                    if k is UNKNOWN:
                        return UNKNOWN
                    keys |= k
                    seen_literal = True
                elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name:
                    if isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                        keys.add(t.slice.value)
                    else:
                        return UNKNOWN
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            if dotted(call.func) in (f"{name}.update", f"{name}.setdefault"):
                if call.args and dotted(call.func).endswith("setdefault") and isinstance(call.args[0], ast.Constant):
                    keys.add(call.args[0].value)
                elif call.args and (k := _dict_keys(call.args[0])) is not UNKNOWN:
                    keys |= k
                else:
                    return UNKNOWN
    return keys if seen_literal else UNKNOWN


def _omni_output_keys(fn: ast.AST, call: ast.Call) -> set[str] | None:
    if any(isinstance(a, ast.Starred) for a in call.args):
        return UNKNOWN  # OmniOutput(*fields)
    mm = next((k.value for k in call.keywords if k.arg == "multimodal_outputs"), None)
    if mm is None and len(call.args) >= 2:
        mm = call.args[1]
    if mm is None:
        return set() if not any(k.arg is None for k in call.keywords) else UNKNOWN
    if isinstance(mm, ast.Name):
        return _name_keys(fn, mm.id)
    return _dict_keys(mm)


def _is_omni_output(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and dotted(node.func).split(".")[-1] == "OmniOutput"


def return_paths(src: SourceFile, fn_info, depth: int = 0) -> list[tuple[ast.AST, set[str] | None]]:
    """(return node, multimodal keys it emits or None if unknown) for each return of a hook,
    following in-file helpers that build the output."""
    out = []
    fn = fn_info.node
    assigned: dict[str, list[ast.AST]] = {}
    for stmt, _ctx in iter_stmts(fn.body):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            assigned.setdefault(stmt.targets[0].id, []).append(stmt.value)
    for stmt, _ctx in iter_stmts(fn.body):
        if not isinstance(stmt, ast.Return):
            continue
        value = stmt.value
        if isinstance(value, ast.Name) and len(assigned.get(value.id, [])) == 1:
            value = assigned[value.id][0]
        if _is_omni_output(value):
            out.append((stmt, _omni_output_keys(fn, value)))
        elif isinstance(value, ast.Call) and depth < 3:
            target = src.index.resolve(fn_info, value)
            if target is not None and target is not fn_info:
                sub = return_paths(src, target, depth + 1)
                out.extend(sub if sub else [(stmt, UNKNOWN)])
            else:
                out.append((stmt, UNKNOWN))
        else:
            out.append((stmt, UNKNOWN))
    return out


def audio_hooks(src: SourceFile):
    """(class name, hook FuncInfo, return paths) for output hooks that emit audio on some path."""
    cached = src.__dict__.get("_i1_hooks")
    if cached is None:
        cached = []
        for cname, cls in src.index.classes.items():
            for hook in OUTPUT_HOOKS:
                fn = cls.methods.get(hook)
                if fn is None:
                    continue
                paths = return_paths(src, fn)
                if any(keys and keys & AUDIO_KEYS for _n, keys in paths):
                    cached.append((cname, fn, paths))
        src.__dict__["_i1_hooks"] = cached
    return cached


_HDR = """
import torch
from vllm_omni.model_executor.models.output_templates import OmniOutput


class Code2Wav(torch.nn.Module):
    def forward(self, input_ids, runtime_additional_information=None, **kwargs):
"""


@register
class DeclareDeltaOrCumulative(Rule):
    """An audio-emitting `forward()` (or `make_omni_output()`) whose docstring does not say whether
    each step's output is a delta or cumulative.

    A hook is audio-emitting when one of its return paths builds `OmniOutput` with a
    `model_outputs` or `audio` entry.

    Why: delta-vs-cumulative mismatch is the most common silent bug (I1): offline RTF passes while
    streaming users hear replays or truncation. The docstring is the contract the consumers, the
    consolidation step and the reviewers check against.

    Fix: say it in the docstring, e.g. "Emits delta audio: only the samples produced this step."
    (preferred), or "cumulative" with the reason the codec has no streaming decode.
    """

    id = "OMNI-I1-001"
    name = "declare-delta-or-cumulative"
    invariant = "I1"
    severity = "error"
    needles = ("OmniOutput",)
    VALID = [
        Valid(
            _HDR
            + '''        """Emits delta audio: only the samples decoded this step."""
        return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [input_ids.float()]})
'''
        ),
        Valid(
            _HDR
            + """        return OmniOutput(text_hidden_states=None, multimodal_outputs={"codes": [input_ids]})
""",
            note="intermediate stage: no audio key",
        ),
    ]
    INVALID = [
        Invalid(
            _HDR
            + '''        """Decode codec tokens."""
        return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [input_ids.float()]})
''',
            line=7,
            message="delta or cumulative",
        ),
    ]

    def check(self, src: SourceFile):
        by_class: dict[str, list] = {}
        for cname, fn, _paths in audio_hooks(src):
            by_class.setdefault(cname, []).append(fn)
        for cname, fns in by_class.items():
            cls = src.index.classes[cname]
            docs = [ast.get_docstring(f.node) or "" for f in cls.methods.values() if f.name in OUTPUT_HOOKS]
            if not any(_SEMANTICS.search(d) for d in docs):
                fn = fns[0]
                yield Rule.at(
                    fn.node,
                    f"`{fn.qualname}` emits audio but its docstring does not declare delta or "
                    "cumulative per-step output",
                )


@register
class EveryReturnEmitsAudio(Rule):
    """A return path of an audio-emitting `forward()`/`make_omni_output()` (or of an in-file helper
    that builds its output) whose `OmniOutput` has no `model_outputs`/`audio` entry.

    Why: the serving layer silently drops that step's audio (fish speech: "ensure ALL return paths
    emit model_outputs"); early returns for empty input, dummy runs or finished requests are the
    usual culprits.

    Fix: return `multimodal_outputs={"model_outputs": [empty] * n, "sr": [sr] * n}` on every path,
    with an empty 1-D float32 tensor per request when there is nothing new.
    """

    id = "OMNI-I1-002"
    name = "every-return-emits-audio"
    invariant = "I1"
    severity = "error"
    needles = ("OmniOutput",)
    VALID = [
        Valid(
            _HDR
            + '''        """Delta audio."""
        if input_ids.numel() == 0:
            return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [torch.zeros(0)]})
        return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [input_ids.float()]})
'''
        ),
        Valid(
            _HDR
            + '''        """Delta audio."""
        mm = {"sr": [torch.tensor(24000)]}
        mm["model_outputs"] = [input_ids.float()]
        return OmniOutput(text_hidden_states=None, multimodal_outputs=mm)
''',
            note="key added after the literal",
        ),
    ]
    INVALID = [
        Invalid(
            _HDR
            + '''        """Delta audio."""
        if input_ids.numel() == 0:
            return OmniOutput(text_hidden_states=None, multimodal_outputs={})
        return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [input_ids.float()]})
''',
            line=10,
            message="no `model_outputs`",
        ),
        Invalid(
            _HDR
            + '''        """Delta audio."""
        if runtime_additional_information is None:
            return self._empty()
        return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": [input_ids.float()]})

    def _empty(self):
        return OmniOutput(text_hidden_states=None)
''',
            line=14,
            message="no `model_outputs`",
        ),
    ]

    def check(self, src: SourceFile):
        seen = set()
        for _cname, fn, paths in audio_hooks(src):
            for node, keys in paths:
                if keys is UNKNOWN or keys & AUDIO_KEYS or keys - META_KEYS or id(node) in seen:
                    continue
                seen.add(id(node))
                emitted = ", ".join(sorted(keys)) or "nothing"
                yield Rule.at(
                    node,
                    f"this return path of `{fn.qualname}` emits no `model_outputs` (emits {emitted}); "
                    "the serving layer drops this step's audio",
                )


# --- tree scope: the target's consolidation ---------------------------------------------------


def _helpers(tree: ast.Module) -> dict[str, ast.AST]:
    """In-file functions and methods by name (what `self.h(...)` / `h(...)` in a consolidation can call)."""
    return {n.name: n for n in walk(tree) if isinstance(n, FUNC_TYPES)}


def _expand(expr: ast.AST, helpers: dict[str, ast.AST], depth: int = 0) -> list[ast.AST]:
    """The expression and, for the in-file helpers it calls, what they return (`if self._is_rate(k):`)."""
    out = [expr]
    if depth > 2:
        return out
    for n in walk(expr):
        if isinstance(n, ast.Call):
            name = dotted(n.func).split(".")[-1]
            target = helpers.get(name)
            if target is not None and (isinstance(n.func, ast.Name) or dotted(n.func).startswith(("self.", "cls."))):
                for r in walk(target):
                    if isinstance(r, ast.Return) and r.value is not None:
                        out += _expand(r.value, helpers, depth + 1)
    return out


def _mentions_audio(test: ast.AST, helpers: dict[str, ast.AST] | None = None) -> bool:
    for part_expr in _expand(test, helpers or {}):
        for n in walk(part_expr):
            if isinstance(n, ast.Compare):
                for part in [n.left, *n.comparators]:
                    if isinstance(part, ast.Constant) and part.value == "audio":
                        return True
                    if isinstance(part, ast.Tuple | ast.List | ast.Set) and any(
                        isinstance(e, ast.Constant) and e.value == "audio" for e in part.elts
                    ):
                        return True
    return False


def consolidation_skips(tree: ast.Module) -> list[tuple[ast.AST, str]]:
    """`continue` statements that skip the audio key inside a consolidation function."""
    found = []
    helpers = _helpers(tree)
    for fn in walk(tree):
        if not isinstance(fn, FUNC_TYPES) or "consolidat" not in fn.name:
            continue
        for n in walk(fn):
            if (
                isinstance(n, ast.If)
                and _mentions_audio(n.test, helpers)
                and any(isinstance(s, ast.Continue) for s in n.body)
            ):
                found.append((n, fn.name))
    return found


_RATE_KEYS = ("sr", "sample_rate", "sampling_rate")


def consolidation_concats_rate(tree: ast.Module) -> list[tuple[ast.AST, str]]:
    """A consolidation function that concatenates every accumulated key (`torch.cat(v, ...)`) and
    never names the sample-rate key (itself or through the in-file helpers it calls): `sr`, emitted
    once per step, becomes a tensor of N rates."""
    found = []
    helpers = _helpers(tree)
    for fn in walk(tree):
        if not isinstance(fn, FUNC_TYPES) or "consolidat" not in fn.name:
            continue
        if any(isinstance(n, ast.Constant) and n.value in _RATE_KEYS for e in _expand(fn, helpers) for n in walk(e)):
            continue
        hit = _generic_cat(fn.body, helpers)
        if hit is not None:
            found.append((hit, fn.name))
    return found


def _generic_cat(body: list[ast.stmt], helpers: dict[str, ast.AST] | None = None) -> ast.Call | None:
    """The first `torch.cat(v, ...)` not confined to one named key (`if k == "audio": ...`)."""
    for s in body:
        if isinstance(s, ast.If):
            keyed = any(
                isinstance(n, ast.Constant) and isinstance(n.value, str)
                for e in _expand(s.test, helpers or {})
                for n in walk(e)
            )
            found = (None if keyed else _generic_cat(s.body, helpers)) or _generic_cat(s.orelse, helpers)
            if found is not None:
                return found
            continue
        for n in walk(s) if not hasattr(s, "body") else [x for e in _own(s) for x in walk(e)]:
            if (
                isinstance(n, ast.Call)
                and dotted(n.func) in ("torch.cat", "torch.concat", "torch.concatenate")
                and n.args
                and isinstance(n.args[0], ast.Name)
            ):
                return n
        for block in (getattr(s, "body", None), getattr(s, "orelse", None), getattr(s, "finalbody", None)):
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                found = _generic_cat(block, helpers)
                if found is not None:
                    return found
        for h in getattr(s, "handlers", []) or []:
            found = _generic_cat(h.body, helpers)
            if found is not None:
                return found
    return None


def _own(s: ast.stmt) -> list[ast.AST]:
    from omnitts.validators.static.index import stmt_exprs

    return stmt_exprs(s)


@register
class ConsolidationKeepsAudio(Rule):
    """The target tree's output consolidation (`_consolidate_multimodal_tensors`) skips the audio
    key with `continue` instead of concatenating it, or concatenates every key including the sample
    rate `sr` (0.14.0-0.16.0: a per-step `sr` becomes a tensor of N rates, and `int(sr)` or
    `sr.item()` in the consumer fails).

    Checked in the tree being linted (0.14.0-0.18.0 skip it; 0.20.0+ concatenate audio with
    `cat(dim=-1)`, skipping only in DELTA output mode, which is correct).

    Why: with a skipped key, offline consumers (`engine.generate()`) receive a list of chunks or
    only the final chunk of a delta-emitting model, while streaming looks fine.

    Fix: target a release that concatenates audio at finish, or make the model's examples and tests
    concatenate the list form themselves (I2) and say so in the model docs.
    """

    id = "OMNI-I1-003"
    name = "consolidation-keeps-audio"
    invariant = "I1"
    severity = "error"
    scope = "tree"
    _OP = """
class OmniRequestState:
    def _consolidate_multimodal_tensors(self):
        for k, v in self.mm_accumulated.items():
{body}
"""
    VALID = [
        Valid(
            files={
                "vllm_omni/__init__.py": "",
                "vllm_omni/model_executor/models/registry.py": "_OMNI_MODELS = {}\n",
                "vllm_omni/engine/output_processor.py": _OP.format(
                    body="""            if k == "audio":
                self.mm_accumulated[k] = torch.cat(v, dim=-1)"""
                ),
            }
        ),
        Valid(
            files={
                "vllm_omni/__init__.py": "",
                "vllm_omni/model_executor/models/registry.py": "_OMNI_MODELS = {}\n",
                "vllm_omni/engine/output_processor.py": _OP.format(
                    body="""            if k == "audio":
                self.mm_accumulated[k] = torch.cat(v, dim=-1)
            elif k == "sr":
                self.mm_accumulated[k] = v[-1]
            else:
                self.mm_accumulated[k] = torch.cat(v, dim=0)"""
                ),
            }
        ),
    ]
    INVALID = [
        Invalid(
            files={
                "vllm_omni/__init__.py": "",
                "vllm_omni/model_executor/models/registry.py": "_OMNI_MODELS = {}\n",
                "vllm_omni/engine/output_processor.py": _OP.format(
                    body="""            if k == "audio":
                continue"""
                ),
            },
            path="vllm_omni/engine/output_processor.py",
            line=5,
            message="skips the audio key",
        ),
        Invalid(
            files={
                "vllm_omni/__init__.py": "",
                "vllm_omni/model_executor/models/registry.py": "_OMNI_MODELS = {}\n",
                "vllm_omni/engine/output_processor.py": _OP.format(
                    body="""            if k == "audio":
                self.mm_accumulated[k] = torch.cat(v, dim=-1)
            else:
                self.mm_accumulated[k] = torch.cat(v, dim=0)"""
                ),
            },
            path="vllm_omni/engine/output_processor.py",
            line=8,
            message="sample rate",
        ),
    ]

    def check_tree(self, ctx):
        for rel in CONSOLIDATION_FILES:
            text = ctx.read(rel)
            if not text or "consolidat" not in text:
                continue
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue  # reported as OMNI-META-001 by the file pass
            for node, fname in consolidation_concats_rate(tree):
                yield Report(
                    node.lineno,
                    node.col_offset + 1,
                    f"`{fname}` concatenates every accumulated key, the sample rate `sr` too: a per-step "
                    "`sr` becomes a tensor of N rates (keep the last value for scalar keys)",
                    node,
                    path=rel,
                )
            for node, fname in consolidation_skips(tree):
                rep = Report(
                    node.lineno,
                    node.col_offset + 1,
                    f"`{fname}` skips the audio key (`continue`): offline consumers of a delta-emitting model "
                    "get a list of chunks or only the last one",
                    node,
                    path=rel,
                )
                yield rep
