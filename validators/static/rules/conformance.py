"""REF — conformance with the model's reference: what a port silently changes about how the upstream model
generates (its sampling, its randomness, the precision of its decoder, its generation defaults). These are
the field's recurring drifts (research: field_struggles.md section 1, items 1 and 6); each rule names the
pull requests that motivate it (`motivation`, rendered in docs/rules.md and docs/rules_conformance.md).

What a value is follows the data: the sampling API's own keywords and what a constant feeds (`topk(k)`,
a cumulative-probability cut, logits divided before a softmax), the random functions' `generator=`
argument, the module whose output becomes the emitted audio (followed back from `model_outputs`), and
the deploy YAML against the checkpoint's own generation_config.json.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

from omnitts.validators.static.index import FUNC_TYPES, dotted, is_self_attr, iter_stmts, walk
from omnitts.validators.static.rule import Invalid, Report, Rule, Valid, register
from omnitts.validators.static.rules.integration_config import _PIPE1, _REG, _views
from omnitts.validators.static.source import SourceFile

# The sampling API's keyword names (vLLM SamplingParams, HF GenerationConfig, upstream samplers).
SAMPLING_KEYS = frozenset({"top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty"})
TEMPERATURE = "temperature"
_SAMPLE_OPS = re.compile(r"multinomial|softmax|\.topk\(|torch\.topk|gumbel")


def _number(node: ast.AST | None) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _number(node.operand)
        return -v if v is not None else None
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return float(node.value)
    return None


def _constants(fn: ast.AST) -> dict[str, ast.AST]:
    """Local names every assignment of which (in this function) is a numeric constant: name -> its constant."""
    seen: dict[str, ast.AST | None] = {}
    for n in walk(fn):
        if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                for x in walk(t):
                    if isinstance(x, ast.Name):
                        value = n.value if isinstance(n, ast.Assign | ast.AnnAssign) and t is x else None
                        ok = value is not None and _number(value) is not None and not isinstance(n, ast.AugAssign)
                        prev = seen.get(x.id, "unset")
                        seen[x.id] = value if ok and prev in ("unset",) else (None if not ok or prev is None else prev)
        elif isinstance(n, ast.For | ast.comprehension):
            for x in walk(n.target):
                if isinstance(x, ast.Name):
                    seen[x.id] = None
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
    return {k: v for k, v in seen.items() if v is not None and k not in params}


def _const_of(node: ast.AST, consts: dict[str, ast.AST]) -> ast.AST | None:
    if _number(node) is not None:
        return node
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    return None


def _model_functions(src: SourceFile):
    """Functions of model code that run while generating (per step or reached from a hook)."""
    index = src.index
    for qual in sorted(index.per_step):
        yield index.functions[qual]


_SAMPLING_EX = """
import torch


class Talker(torch.nn.Module):
    def compute_logits(self, hidden_states, sampling_metadata=None):
        logits = self.lm_head(hidden_states)
        return logits

    def sample(self, logits, sampling_metadata):
{body}
"""


def _sampling_ex(body: str) -> str:
    return _SAMPLING_EX.format(body="\n".join("        " + line for line in body.strip().splitlines()))


@register
class HardCodedSampling(Rule):
    """Model code that samples tokens with constant sampling parameters instead of the request's: a
    sampling call given `top_k=50`/`top_p=0.95`/`repetition_penalty=1.1` (a temperature too, where the
    call samples), or a constant that does a sampling parameter's job in the model's own sampler
    (`x.topk(50)`, a cumulative-probability cut at `0.95`, logits divided by a constant before a softmax).

    Reported in functions the runner drives while generating (the per-step hooks and what they call).
    A default taken only when the request gives none (`0.8 if temperature is None else temperature`) is
    not reported; `topk(1)`/argmax is greedy decoding and not reported here.

    Why: every request gets the model's constants: the temperature, top-k and top-p a user (or the deploy's
    `default_sampling_params`) sets are silently ignored, and the output drifts from the reference
    implementation's sampling (field record: the request's parameters ignored for Higgs Audio v2/v3 audio
    codes and MOSS-TTS; a Qwen3-TTS code predictor with its own fixed values).

    Fix: read the parameters from vLLM's `SamplingMetadata` (`sample(logits, sampling_metadata)`:
    `sampling_metadata.temperature`, `.top_k`, `.top_p`, one entry per request) or from the request's
    dict, and apply them per request row.
    """

    id = "OMNI-REF-001"
    name = "hard-coded-sampling"
    invariant = "REF"
    severity = "error"
    needles = ("top_k", "top_p", "topk", "repetition_penalty", "temperature", "min_p", "cumsum")
    motivation = (
        "vllm-project/vllm-omni#5387 (Higgs Audio v3 sampling parameters ignored for audio codes), #5406 (the fix: "
        "SamplingMetadata into the codebook sampler), #5386 (roadmap comment: Higgs Audio v2 and MOSS-TTS still "
        "hard-code temperature/top_k/top_p), #2942 (Qwen3-TTS subtalker with hard-coded sampling values), "
        "#6156 (MOSS-TTS-Local: use the official sampling parameters)"
    )
    VALID = [
        Valid(
            _sampling_ex("""probs = torch.softmax(logits / sampling_metadata.temperature.unsqueeze(-1), dim=-1)
return torch.multinomial(probs, 1, generator=sampling_metadata.generators.get(0))""")
        ),
        Valid(
            _sampling_ex("""k = sampling_metadata.top_k
return self.sampler(logits, temperature=0.8 if k is None else 1.0, top_k=k)"""),
            note="constants only as fallbacks beside the request's values",
        ),
        Valid(_sampling_ex("""return logits.topk(1, dim=-1).indices"""), note="greedy"),
    ]
    INVALID = [
        Invalid(
            _sampling_ex(
                """return self.local_transformer.generate_frame(logits, temperature=0.8, top_p=0.6, top_k=30)"""
            ),
            line=11,
            message="`temperature=0.8`",
            count=3,
        ),
        Invalid(
            _sampling_ex("""top_k = 50
kth = logits.topk(top_k, dim=-1).values[..., -1:]
logits = logits.masked_fill(logits < kth, float("-inf"))
return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=None)"""),
            line=11,
            message="top-k of 50",
        ),
    ]

    def check(self, src: SourceFile):
        seen: set[int] = set()
        for fn in _model_functions(src):
            text = src.node_text(fn.node)
            if not any(n in text for n in self.needles):
                continue
            consts = _constants(fn.node)
            samples = bool(_SAMPLE_OPS.search(text))
            for n in walk(fn.node):
                if isinstance(n, ast.Call):
                    yield from self._keywords(src, fn, n, consts, samples, seen)
                    yield from self._topk(src, fn, n, consts, seen)
                elif isinstance(n, ast.Compare):
                    yield from self._top_p(src, fn, n, consts, seen)

    def _keywords(self, src, fn, call: ast.Call, consts, samples: bool, seen: set[int]):
        kws = {k.arg: k.value for k in call.keywords if k.arg}
        keys = [k for k in kws if k in SAMPLING_KEYS or k == TEMPERATURE]
        if not keys:
            return
        if keys == [TEMPERATURE] and not (samples or self._callee_samples(src, fn, call)):
            return  # a noise temperature (flow matching) is not a token sampling parameter
        for k in keys:
            c = _const_of(kws[k], consts)
            if c is None or id(kws[k]) in seen:
                continue
            seen.add(id(kws[k]))
            yield Rule.at(
                kws[k],
                f"`{k}={ast.unparse(c)}` in `{fn.qualname}` samples every request with the model's constant, not "
                "the request's own sampling parameters (SamplingMetadata)",
            )

    @staticmethod
    def _callee_samples(src, fn, call) -> bool:
        target = src.index.resolve(fn, call)
        return target is not None and bool(_SAMPLE_OPS.search(src.node_text(target.node)))

    @staticmethod
    def _topk(src, fn, call: ast.Call, consts, seen: set[int]):
        name = dotted(call.func)
        if not (name.endswith(".topk") or name == "torch.topk"):
            return
        args = call.args[1:] if name == "torch.topk" else call.args
        k = args[0] if args else next((kw.value for kw in call.keywords if kw.arg == "k"), None)
        c = _const_of(k, consts) if k is not None else None
        if c is None or (_number(c) or 0) <= 1 or id(c) in seen:
            return
        seen.add(id(c))
        yield Rule.at(
            c,
            f"a top-k of {ast.unparse(c)} in `{fn.qualname}`: the model's constant filters every request's logits, "
            "not the request's top_k",
        )

    @staticmethod
    def _top_p(src, fn, cmp: ast.Compare, consts, seen: set[int]):
        if len(cmp.ops) != 1 or not isinstance(cmp.ops[0], ast.Gt | ast.GtE | ast.Lt | ast.LtE):
            return
        sides = [cmp.left, cmp.comparators[0]]
        if not any("cumsum" in ast.unparse(s) or _cumsum_name(fn.node, s) for s in sides):
            return
        for s in sides:
            c = _const_of(s, consts)
            v = _number(c) if c is not None else None
            if v is not None and 0 < v < 1 and id(c) not in seen:
                seen.add(id(c))
                yield Rule.at(
                    c,
                    f"a top-p cut at {ast.unparse(c)} in `{fn.qualname}`: the model's constant, not the request's "
                    "top_p",
                )


def _cumsum_name(fn: ast.AST, node: ast.AST) -> bool:
    if not isinstance(node, ast.Name):
        return False
    for n in walk(fn):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets):
            if "cumsum" in ast.unparse(n.value):
                return True
    return False


# --- random draws ---------------------------------------------------------------------------------
RANDOM_FUNCS = frozenset(
    "multinomial rand randn randint randperm bernoulli normal poisson rand_like randn_like randint_like".split()
)
RANDOM_METHODS = frozenset("exponential_ uniform_ normal_ bernoulli_ random_ geometric_ cauchy_ log_normal_".split())
_PY_RANDOM = re.compile(r"^(random|np\.random|numpy\.random)\.")


@register
class UnseededRandomDraw(Rule):
    """A random draw in code the runner drives while generating (`torch.multinomial`, `torch.randn`,
    `torch.rand_like`, `x.exponential_()`, `random.random()`, `np.random.*`) that takes no
    `generator=` (or passes `generator=None`): it ignores the request's seed and the per-request
    generators vLLM keeps (`sampling_metadata.generators`).

    Why: `SamplingParams.seed` no longer makes a request reproducible, and a fixed-seed request's output
    changes with whatever else is batched with it (field record: Higgs Audio v3's `torch.multinomial` without
    `sampling_metadata.generators`; fixed-seed output changing when co-batched).

    Fix: draw with the request's generator: `torch.multinomial(probs, 1, generator=generators.get(i))`
    per request row (vLLM's `SamplingMetadata.generators`, keyed by the row), or build one per request
    from its seed (`torch.Generator(device).manual_seed(seed)`, the runner's `_omni_seed` from 0.28)
    and keep it in the request's state.
    """

    id = "OMNI-REF-002"
    name = "unseeded-random-draw"
    invariant = "REF"
    severity = "error"
    needles = tuple(sorted(RANDOM_FUNCS | RANDOM_METHODS | {"random."}))
    motivation = (
        "vllm-project/vllm-omni#5386 (roadmap comment: Higgs Audio v3's torch.multinomial does not use "
        "sampling_metadata.generators, so SamplingParams.seed does not control the codebook draw), #6361 "
        "(fixed-seed output changes when co-batched)"
    )
    VALID = [
        Valid(
            _sampling_ex("""probs = torch.softmax(logits, dim=-1)
gen = sampling_metadata.generators.get(0)
return torch.multinomial(probs, 1, generator=gen)""")
        ),
        Valid(
            """
import torch


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.noise = torch.randn(1, 80, 100)  # once, at construction
""",
            note="not in per-step code",
        ),
        Valid(
            _sampling_ex("""probs = torch.softmax(logits, dim=-1)
gens = sampling_metadata.generators
if gens:
    return torch.cat([torch.multinomial(p[None], 1, generator=gens.get(i)) for i, p in enumerate(probs)])
return torch.multinomial(probs, 1)"""),
            note="the unseeded draw runs only when no request asked for a seed",
        ),
    ]
    INVALID = [
        Invalid(
            _sampling_ex("""probs = torch.softmax(logits, dim=-1)
return torch.multinomial(probs, 1)"""),
            line=12,
            message="no `generator=`",
        ),
        Invalid(
            """
import torch


class Code2Wav(torch.nn.Module):
    def forward(self, input_ids, runtime_additional_information=None, **kwargs):
        \"\"\"Delta audio.\"\"\"
        mu = self.encoder(input_ids)
        z = torch.randn_like(mu)
        return self.flow(z, mu)
""",
            line=9,
            message="no `generator=`",
        ),
    ]

    def check(self, src: SourceFile):
        for fn in _model_functions(src):
            text = src.node_text(fn.node)
            if not any(n in text for n in self.needles):
                continue
            # The seeded/training analyses walk the whole function: only where an unseeded draw is there at all.
            if not any(isinstance(n, ast.Call) and self._unseeded(n) for n in walk(fn.node)):
                continue
            skip = _seeded_alternatives(src, fn) | _training_only(fn.node)
            for stmt, ctx in iter_stmts(fn.node.body):
                if ctx.guarded or isinstance(stmt, FUNC_TYPES) or id(stmt) in skip:
                    continue
                for expr in _exprs(stmt):
                    for n in walk(expr):
                        if isinstance(n, ast.Call) and id(n) not in skip and self._unseeded(n):
                            yield Rule.at(
                                n,
                                f"`{dotted(n.func) or ast.unparse(n.func)}(...)` in `{fn.qualname}` draws with no "
                                "`generator=`: it ignores the request's seed and generator (SamplingMetadata."
                                "generators)",
                            )

    @staticmethod
    def _unseeded(call: ast.Call) -> bool:
        name = dotted(call.func)
        last = name.split(".")[-1] if name else (call.func.attr if isinstance(call.func, ast.Attribute) else "")
        gen = next((k.value for k in call.keywords if k.arg == "generator"), None)
        if gen is not None and not (isinstance(gen, ast.Constant) and gen.value is None):
            return False
        if _PY_RANDOM.match(name or ""):
            return not name.endswith(("seed", "Generator", "RandomState", "default_rng", "get_state", "set_state"))
        if name.startswith("torch.") and last in RANDOM_FUNCS:
            return True
        return isinstance(call.func, ast.Attribute) and last in RANDOM_METHODS


def _seeds(src: SourceFile, fn, node: ast.AST) -> bool:
    """Code that draws with a generator or seeds one (`generator=g`, `manual_seed(...)`), itself or through an
    in-file helper it calls."""
    for n in walk(node):
        if not isinstance(n, ast.Call):
            continue
        if any(k.arg == "generator" and not (isinstance(k.value, ast.Constant) and k.value.value is None)
               for k in n.keywords) or dotted(n.func).endswith("manual_seed"):  # fmt: skip
            return True
        target = src.index.resolve(fn, n)
        if target is not None and target is not fn:
            if any(
                isinstance(c, ast.Call)
                and (any(k.arg == "generator" for k in c.keywords) or dotted(c.func).endswith("manual_seed"))
                for c in walk(target.node)
            ):
                return True
    return False


def _seeded_alternatives(src: SourceFile, fn) -> set[int]:
    """Statements and calls that run only when the request has no generator or seed: the other branch of a
    conditional that draws seeded (`if generators: ...(generator=g) else: torch.rand(...)`), and a fresh seed
    drawn for an unseeded request (`manual_seed(seed if seed is not None else random.randint(...))`)."""
    out: set[int] = set()
    for n in walk(fn.node):
        if isinstance(n, ast.If):
            branches = [n.body, n.orelse]
            for i, branch in enumerate(branches):
                other = branches[1 - i]
                if other and any(_seeds(src, fn, s) for s in other):
                    out |= {id(x) for s in branch for x in walk(s)}
        elif isinstance(n, ast.IfExp):
            for mine, other in ((n.body, n.orelse), (n.orelse, n.body)):
                if _seeds(src, fn, other):
                    out |= {id(x) for x in walk(mine)}
        elif isinstance(n, ast.Call) and _callee_name(n.func) in ("manual_seed", "Generator"):
            out |= {id(x) for a in n.args for x in walk(a)}
        # `if seeded: return draw(generator=g)` followed by the unseeded draw: the rest of the block is the else
        for block in (getattr(n, f, None) for f in ("body", "orelse", "finalbody")):
            if not isinstance(block, list):
                continue
            for i, st in enumerate(block):
                if (
                    isinstance(st, ast.If)
                    and st.body
                    and isinstance(st.body[-1], ast.Return)
                    and any(_seeds(src, fn, b) for b in st.body)
                ):
                    out |= {id(x) for rest in block[i + 1 :] for x in walk(rest)}
    return out


def _callee_name(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _training_only(fn: ast.AST) -> set[int]:
    """Code under `if self.training:` (dropout, codebook refresh), directly or through a flag computed from it: a
    served model is in eval mode."""
    out: set[int] = set()
    flags = {
        t.id
        for n in walk(fn)
        if isinstance(n, ast.Assign)
        and isinstance(n.value, ast.BoolOp)
        and isinstance(n.value.op, ast.And)
        and any(dotted(v) == "self.training" for v in n.value.values)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    for n in walk(fn):
        if isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id in flags:
            out |= {id(x) for s in n.body for x in walk(s)}
        if (
            isinstance(n, ast.If)
            and any(
                isinstance(x, ast.Attribute) and x.attr == "training" and dotted(x) == "self.training"
                for x in walk(n.test)
            )
            and not any(isinstance(x, ast.UnaryOp) and isinstance(x.op, ast.Not) for x in walk(n.test))
        ):
            out |= {id(x) for s in n.body for x in walk(s)}
            out |= {id(x) for x in walk(n.test)}
    return out


def _exprs(stmt: ast.stmt) -> list[ast.AST]:
    from omnitts.validators.static.index import stmt_exprs

    return stmt_exprs(stmt)


# --- decoder precision ----------------------------------------------------------------------------
LOW_DTYPES = frozenset({"bfloat16", "float16", "half", "bf16", "fp16"})
_AUDIO_KEYS = frozenset({"model_outputs", "audio"})


def _low(node: ast.AST | None) -> bool:
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in LOW_DTYPES
    return dotted(node).split(".")[-1] in LOW_DTYPES and dotted(node).startswith("torch.")


def _emitted_values(fn: ast.AST) -> list[ast.AST]:
    """Expressions stored under the audio keys of what a hook emits (`{"model_outputs": ...}`)."""
    out = []
    for n in walk(fn):
        if isinstance(n, ast.Dict):
            for k, v in zip(n.keys, n.values, strict=False):
                if isinstance(k, ast.Constant) and k.value in _AUDIO_KEYS:
                    out.append(v)
        elif isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value in _AUDIO_KEYS:
                    out.append(n.value)
    return out


def decoder_attrs(src: SourceFile) -> dict[str, set[str]]:
    """class -> the `self.<attr>` modules whose output becomes the emitted audio, followed back from the
    output hooks' audio keys through assignments, list appends and in-file helpers' returns."""
    index = src.index
    out: dict[str, set[str]] = {}
    for fn in index.functions.values():
        hook = index.hook(fn)
        if hook is None or hook.name not in ("forward", "make_omni_output") or fn.cls is None:
            continue
        roots = _emitted_values(fn.node)
        if not roots:
            continue
        attrs: set[str] = set()
        _producers(index, fn, roots, attrs, depth=0, seen=set())
        if attrs:
            out.setdefault(fn.cls, set()).update(attrs)
    return out


def _producers(index, fn, exprs: list[ast.AST], attrs: set[str], depth: int, seen: set) -> None:
    if depth > 3 or (fn.qualname, depth) in seen:
        return
    seen.add((fn.qualname, depth))
    assigns: dict[str, list[ast.AST]] = {}
    appends: dict[str, list[ast.AST]] = {}
    for n in walk(fn.node):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for x in walk(t):
                    if isinstance(x, ast.Name):
                        assigns.setdefault(x.id, []).append(n.value)
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr in ("append", "extend")
            and isinstance(n.func.value, ast.Name)
            and n.args
        ):
            appends.setdefault(n.func.value.id, []).append(n.args[0])
    work, done = list(exprs), set()
    while work:
        e = work.pop()
        if id(e) in done:
            continue
        done.add(id(e))
        for n in walk(e):
            if isinstance(n, ast.Name):
                work += assigns.get(n.id, []) + appends.get(n.id, [])
            elif isinstance(n, ast.Call):
                func = n.func
                attr = is_self_attr(func)
                if attr is not None and index.method(fn.cls, attr) is None:
                    attrs.add(attr)  # self.vocoder(codes)
                elif isinstance(func, ast.Attribute) and (a := is_self_attr(func.value)) is not None:
                    if index.method(fn.cls, a) is None:
                        attrs.add(a)  # self.codec.decode(codes)
                target = index.resolve(fn, n)
                if target is not None and target is not fn:
                    rets = [r.value for r in walk(target.node) if isinstance(r, ast.Return) and r.value is not None]
                    _producers(index, target, rets, attrs, depth + 1, seen)


@register
class LowPrecisionDecoder(Rule):
    """The codec decoder or vocoder (the module whose output becomes the emitted audio, followed back from
    `model_outputs`/`audio`) loaded or run in bfloat16/float16: `from_pretrained(..., torch_dtype=torch.bfloat16)`,
    `self.codec.to(torch.float16)`, `.half()`, `.bfloat16()`, or a decode under
    `torch.autocast(..., dtype=torch.bfloat16)`.

    Why: codec decoders (SnakeBeta activations, weight-normed convolutions, iSTFT) overflow in 16-bit
    floats: NaN, and every sample comes out as silence (field record: Qwen3-TTS's speech tokenizer in
    bfloat16 produced all-silence PCM; fp16-only GPUs produced NaN). The upstream configs keep them in
    float32.

    Fix: load and run the decoder in float32 (`torch_dtype=torch.float32`, `.float()`), casting its input
    codes/latents and only its output to the stage's dtype if needed.
    """

    id = "OMNI-REF-003"
    name = "low-precision-decoder"
    invariant = "REF"
    severity = "error"
    needles = ("bfloat16", "float16", ".half(", "bf16", "fp16")
    motivation = (
        "vllm-project/vllm-omni#1664 (all-silence TTS output: the speech tokenizer decoder loaded in bfloat16 "
        "overflows in SnakeBeta; the fix loads it in float32), #1663 (the bug report), #3253 (NaN on fp16-only GPUs)"
    )
    _C = '''
import torch
from vllm_omni.model_executor.models.output_templates import OmniOutput


class Code2Wav(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.tokenizer = SpeechTokenizer.from_pretrained(config.path, torch_dtype={dtype})

    def forward(self, input_ids, runtime_additional_information=None, **kwargs):
        """Delta audio."""
        wav = self.tokenizer.decode(input_ids)
        return OmniOutput(text_hidden_states=None, multimodal_outputs={{"model_outputs": [wav]}})
'''
    VALID = [
        Valid(_C.format(dtype="torch.float32")),
        Valid(
            _C.format(dtype="torch.float32").replace(
                "super().__init__()", "super().__init__()\n        self.lm = Decoder().to(torch.bfloat16)"
            ),
            note="a bf16 module that does not produce the audio",
        ),
    ]
    INVALID = [
        Invalid(_C.format(dtype="torch.bfloat16"), line=9, message="bfloat16"),
        Invalid(
            _C.format(dtype="torch.float32").replace(
                "wav = self.tokenizer.decode(input_ids)",
                "with torch.autocast('cuda', dtype=torch.float16):\n            wav = self.tokenizer.decode(input_ids)",
            ),
            line=13,
            message="float16",
        ),
        Invalid(
            _C.format(dtype="torch.float32").replace(
                "self.tokenizer = SpeechTokenizer.from_pretrained(config.path, torch_dtype=torch.float32)",
                "tok = SpeechTokenizer.from_pretrained(config.path).half()\n        self.tokenizer = tok",
            ),
            line=9,
            message="half",
            note="cast before it is bound to the attribute",
        ),
    ]

    def check(self, src: SourceFile):
        decoders = decoder_attrs(src)
        if not decoders:
            return
        index = src.index
        for cname, attrs in decoders.items():
            cls = index.classes.get(cname)
            if cls is None:
                continue
            for fn in cls.methods.values():
                once = _bound_once(fn.node)
                for n in walk(fn.node):
                    hit = self._cast(n, attrs, once)
                    if hit is not None:
                        node, attr, how = hit
                        yield Rule.at(
                            node,
                            f"`self.{attr}` produces the emitted audio and is {how}: codec decoders overflow in "
                            "16-bit floats (NaN, silence); keep it in float32",
                        )
            # a decode of one of them under a 16-bit autocast
            for fn in cls.methods.values():
                for n in walk(fn.node):
                    if isinstance(n, ast.With | ast.AsyncWith):
                        for item in n.items:
                            c = item.context_expr
                            if isinstance(c, ast.Call) and dotted(c.func).endswith("autocast"):
                                dt = next((k.value for k in c.keywords if k.arg == "dtype"), None)
                                if _low(dt) and self._uses(n, attrs):
                                    yield Rule.at(
                                        c,
                                        f"a decoder producing the emitted audio runs under `{ast.unparse(c)}`: "
                                        "bfloat16/float16 overflows in codec decoders (NaN, silence); decode in "
                                        "float32",
                                    )

    @staticmethod
    def _uses(with_node: ast.AST, attrs: set[str]) -> bool:
        for n in walk(with_node):
            if isinstance(n, ast.Attribute) and is_self_attr(n) in attrs:
                return True
        return False

    @staticmethod
    def _cast(n: ast.AST, attrs: set[str], once: dict[str, ast.AST]):
        # self.X = Cls.from_pretrained(..., torch_dtype=torch.bfloat16) / Cls(...).to(torch.bfloat16),
        # directly or through a local bound once (`dec = Cls(...).half(); self.X = dec`)
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and is_self_attr(n.targets[0]) in attrs:
            attr = is_self_attr(n.targets[0])
            value = n.value
            if isinstance(value, ast.Name) and value.id in once:
                value = once[value.id]
            for c in walk(value):
                if isinstance(c, ast.Call):
                    for k in c.keywords:
                        if k.arg in ("torch_dtype", "dtype") and _low(k.value):
                            return k.value, attr, f"loaded in `{ast.unparse(k.value)}`"
                    how = _cast_call(c)
                    if how:
                        return c, attr, how
            return None
        # self.X.to(torch.float16) / self.X.half() / self.X.bfloat16(), or through a local bound once to
        # self.X (the same module) or to its bound method (`cast = self.X.half; cast()`)
        func = n.func if isinstance(n, ast.Call) else None
        if isinstance(func, ast.Name) and isinstance(once.get(func.id), ast.Attribute):
            n = ast.Call(func=once[func.id], args=n.args, keywords=n.keywords)
            ast.copy_location(n, once[func.id])
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            base = n.func.value
            if isinstance(base, ast.Name) and base.id in once:
                base = once[base.id]
            attr = is_self_attr(base)
            if attr in attrs:
                how = _cast_call(n)
                if how:
                    return n, attr, how
        return None


def _bound_once(fn: ast.AST) -> dict[str, ast.AST]:
    """Locals of ``fn`` assigned exactly once, by a plain ``name = value``: name -> value."""
    seen: dict[str, list[ast.AST | None]] = {}
    for n in walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                for e in walk(t):
                    if isinstance(e, ast.Name):
                        seen.setdefault(e.id, []).append(n.value if e is t else None)
        elif isinstance(n, ast.AugAssign | ast.AnnAssign | ast.For | ast.NamedExpr | ast.comprehension):
            for e in walk(n.target):
                if isinstance(e, ast.Name):
                    seen.setdefault(e.id, []).append(None)
        elif isinstance(n, ast.With):
            for i in n.items:
                for e in walk(i.optional_vars) if i.optional_vars is not None else ():
                    if isinstance(e, ast.Name):
                        seen.setdefault(e.id, []).append(None)
    return {k: v[0] for k, v in seen.items() if len(v) == 1 and v[0] is not None}


def _cast_call(c: ast.Call) -> str | None:
    if not isinstance(c.func, ast.Attribute):
        return None
    if c.func.attr in ("half", "bfloat16") and not c.args:
        return f"cast with `.{c.func.attr}()`"
    if c.func.attr == "to":
        for a in [*c.args, *(k.value for k in c.keywords if k.arg == "dtype")]:
            if _low(a):
                return f"cast to `{ast.unparse(a)}`"
    return None


# --- deploy defaults vs generation_config ---------------------------------------------------------
_GEN_KEYS = ("temperature", "top_k", "top_p", "repetition_penalty", "min_p")


def _hf_cache_dirs() -> list[Path]:
    home = os.environ.get("HF_HUB_CACHE") or (
        os.path.join(os.environ["HF_HOME"], "hub") if os.environ.get("HF_HOME") else None
    )
    return [Path(home)] if home else [Path.home() / ".cache" / "huggingface" / "hub"]


def generation_configs(ctx, model_dir: str, model_type: str | None) -> list[tuple[str, dict]]:
    """(where, generation config) of the checkpoints this model serves that can be read here: a
    `generation_config.json` in the model's package folder (or model root), or a snapshot in the local
    Hugging Face cache whose config.json has this pipeline's model_type. Nothing is downloaded."""
    out = []
    own = ctx.root / model_dir / "generation_config.json"
    if own.is_file():
        try:
            out.append((f"{model_dir}/generation_config.json", json.loads(own.read_text())))
        except (OSError, ValueError):
            pass
    if model_type:
        for base in _hf_cache_dirs():
            for cfg in sorted(base.glob("models--*/snapshots/*/config.json"))[:2000]:
                gen = cfg.with_name("generation_config.json")
                if not gen.is_file():
                    continue
                try:
                    if json.loads(cfg.read_text()).get("model_type") != model_type:
                        continue
                    out.append((str(gen), json.loads(gen.read_text())))
                except (OSError, ValueError):
                    continue
    return out


def _key_line(text: str, block_line: int, key: str) -> int:
    """The line of `key:` inside the mapping that starts at ``block_line`` (1-based)."""
    lines = text.splitlines()
    if not 0 < block_line <= len(lines):
        return block_line
    indent = len(lines[block_line - 1]) - len(lines[block_line - 1].lstrip())
    for i in range(block_line, len(lines)):
        line = lines[i]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        if re.match(rf"\s*{re.escape(key)}\s*:", line):
            return i + 1
    return block_line


def _disagree(key: str, deploy, gen: dict) -> str | None:
    if key == "temperature" and gen.get("do_sample") is False and isinstance(deploy, int | float) and deploy > 0:
        return "the checkpoint decodes greedily (`do_sample: false`)"
    if key not in gen or isinstance(deploy, bool) or not isinstance(deploy, int | float):
        return None
    want = gen[key]
    if isinstance(want, bool) or not isinstance(want, int | float):
        return None
    if abs(float(deploy) - float(want)) > 1e-6:
        return f"generation_config.json sets {key}: {want}"
    return None


_DEPLOY = """async_chunk: false
stages:
  - stage_id: 0
    max_num_seqs: 4
    default_sampling_params:
      temperature: {t}
      top_k: 50
"""


def _gen_files(temperature: str) -> dict[str, str]:
    return {
        **_REG,
        "vllm_omni/model_executor/models/demo_tts/pipeline.py": _PIPE1,
        "vllm_omni/model_executor/models/demo_tts/generation_config.json": '{"temperature": 0.7, "top_k": 50}',
        "vllm_omni/deploy/demo_tts.yaml": _DEPLOY.format(t=temperature),
    }


@register
class DeployDefaultsMatchGenerationConfig(Rule):
    """A deploy YAML stage whose `default_sampling_params` contradict the generation_config.json of the
    checkpoint the pipeline serves (`temperature`, `top_k`, `top_p`, `repetition_penalty`, `min_p`; a
    temperature above 0 for a checkpoint that decodes greedily).

    The generation config is read where it exists without a download: a `generation_config.json` in the
    model's package folder (or the scaffolded model root), or a snapshot in the local Hugging Face cache whose
    `config.json` has the pipeline's `model_type`. Where none is found there is nothing to compare.

    Why: requests that set no sampling parameters get the deploy's defaults, so a deploy that disagrees with
    the checkpoint makes the served model sound different from the reference (field record: MOSS-TTS-Local
    switched to its official sampling parameters; repetition-penalty semantics differing from upstream).

    Fix: copy the checkpoint's generation_config.json values into `default_sampling_params` (and say so in
    a comment), or suppress with the reason the served values differ on purpose.
    """

    id = "OMNI-REF-004"
    name = "deploy-defaults-match-generation-config"
    invariant = "REF"
    severity = "error"
    scope = "tree"
    motivation = (
        "vllm-project/vllm-omni#6156 (MOSS-TTS-Local: use the official sample params, the model is sensitive to "
        "them), #6458 (repetition-penalty semantics and min_tokens versus forced EOS), #2942 (the deploy YAML's "
        "sampling config not describing what the talker samples with)"
    )
    VALID = [Valid(files=_gen_files("0.7"))]
    INVALID = [
        Invalid(files=_gen_files("1.0"), path="vllm_omni/deploy/demo_tts.yaml", line=6, message="temperature: 0.7")
    ]

    def check_tree(self, ctx):
        for rel, cfg, pipe, _kinds, _audio in _views(ctx):
            model_dir = (
                Path(pipe.path).parent.as_posix() if pipe is not None else f"{ctx.dir('models')}/{Path(rel).stem}"
            )
            stages = [
                (sid, st)
                for sid, st in sorted(cfg.stages.items())
                if isinstance(st.get("default_sampling_params"), dict)
            ]
            if not stages:
                continue
            gens = generation_configs(ctx, model_dir, pipe.model_type if pipe is not None else None)
            if not gens:
                continue
            text = ctx.read(rel)
            for sid, st in stages:
                if sid != min(s for s, _ in stages):
                    continue  # the checkpoint's generation config describes the stage that generates tokens first
                params = st.get("default_sampling_params")
                for where, gen in gens:
                    for key in _GEN_KEYS:
                        if key not in params:
                            continue
                        why = _disagree(key, params[key], gen)
                        if why:
                            yield Report(
                                _key_line(text, st.line_of("default_sampling_params"), key),
                                1,
                                f"stage {sid}'s default_sampling_params sets {key}: {params[key]} but {why} "
                                f"({where}): requests without their own value sample unlike the reference",
                                path=rel,
                                symbol=f"stages[{sid}].default_sampling_params.{key}",
                            )
                    break  # one checkpoint is enough to judge
