"""Integration — code-level rules: optional dependencies imported at module top, request fields
extracted by a parameter builder and never forwarded, codec tensors decoded where they lie."""

from __future__ import annotations

import ast
import re
import sys

from omnitts.validators.static.index import Ctx, dotted, walk
from omnitts.validators.static.rule import CODE, MODEL, Invalid, Rule, Valid, register
from omnitts.validators.static.source import SourceFile
from omnitts.validators.static.tensors import COPY, CPU, INFO, FlowWalker, per_step_functions

_GUARD_EXC = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError", "RuntimeError"}
_STDLIB = set(getattr(sys, "stdlib_module_names", ())) | {"__future__", "typing_extensions"}
_MODEL_DIRS = ("model_executor/", "/models/", "diffusion/models/")


def _guarded(handlers: list[ast.ExceptHandler]) -> bool:
    for h in handlers:
        if h.type is None:
            return True
        names = {dotted(n) for n in ([*h.type.elts] if isinstance(h.type, ast.Tuple) else [h.type])}
        if names & _GUARD_EXC:
            return True
    return False


def _top_imports(tree: ast.Module):
    """(node, module) for imports executed at import time and not guarded by try/except."""

    def walk(body, guarded):
        for stmt in body:
            if isinstance(stmt, ast.Import):
                if not guarded:
                    for a in stmt.names:
                        yield stmt, a.name
            elif isinstance(stmt, ast.ImportFrom):
                if not guarded and stmt.level == 0 and stmt.module:
                    yield stmt, stmt.module
            elif isinstance(stmt, ast.Try):
                yield from walk(stmt.body, guarded or _guarded(stmt.handlers))
                yield from walk(stmt.orelse, guarded)
            elif isinstance(stmt, ast.If):
                if "TYPE_CHECKING" in ast.unparse(stmt.test):
                    continue
                yield from walk(stmt.body, guarded)
                yield from walk(stmt.orelse, guarded)
            elif (
                isinstance(stmt, ast.Expr)
                and isinstance(stmt.value, ast.Call)
                and dotted(stmt.value.func) in ("importlib.import_module", "import_module")
            ):
                arg = stmt.value.args[0] if stmt.value.args else None
                if not guarded and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield stmt, arg.value

    yield from walk(tree.body, False)


@register
class OptionalDepAtImport(Rule):
    """Model code that imports, at module top, a package the target release does not declare as a
    dependency (`torchcodec`, `librosa` after 0.18, `flash_attn`, ...).

    Declared means: the release's required dependencies (wheel `METADATA` `Requires-Dist` without an
    `extra ==` marker, or the sdist's `requirements/common.txt` + `cuda.txt`), plus what every
    vLLM-Omni install has through vLLM (torch, torchaudio, transformers, numpy, ...). Imports inside
    `try/except ImportError`, under `TYPE_CHECKING`, or inside functions are fine.

    Why: the model registry imports model modules lazily, so the failure appears only when that
    model is served, on the environments that miss the package, as a cryptic import error after
    deployment (guide: optional dependency handling).

    Fix: import the optional package at the top of `load_weights()` (with a fallback, e.g. the
    soundfile patch for torchaudio.load), or guard the module-level import.
    """

    id = "OMNI-INT-004"
    name = "optional-dep-at-import"
    invariant = "INT"
    severity = "error"
    kinds = frozenset({MODEL, CODE})
    needles = ("import",)
    VALID = [
        Valid(
            "import torch\nimport numpy as np\n\ntry:\n    import torchcodec\n"
            "except ImportError:\n    torchcodec = None\n"
        ),
        Valid("import torch\n\n\ndef load_weights(self, weights):\n    import torchcodec  # noqa: F401\n"),
    ]
    INVALID = [Invalid("import torch\nimport torchcodec\n", line=2, message="torchcodec")]

    def check(self, src: SourceFile):
        if src.kind == CODE and not any(d in src.rel for d in _MODEL_DIRS):
            return
        facts = src.facts
        own = src.rel.split("/")[0] if "/" in src.rel else ""
        for node, module in _top_imports(src.tree):
            top = module.split(".")[0]
            if top in _STDLIB or top in ("vllm_omni", "omnitts", own) or facts.dep_available(module):
                continue
            where = f"{facts.deps_source}" if facts.declared_deps is not None else "no target metadata found"
            yield Rule.at(
                node,
                f"`{module}` is imported at module top but `{top}` is not a declared dependency of the "
                f"target ({where}); import it inside load_weights() or guard it",
            )


# --- parameter builders ---------------------------------------------------------------------------
_BUILDER = re.compile(r"^_?build\w*params\w*$|^_?build_\w*prompt\w*$|^build$")


def _builders(src: SourceFile):
    for fn in src.index.functions.values():
        name = fn.name
        if not _BUILDER.match(name):
            continue
        cls = src.index.class_of(fn)
        if name == "build" and not (cls and any("Adapter" in b for b in cls.bases)):
            continue
        yield fn


def _request_params(fn) -> set[str]:
    args = [a.arg for a in [*fn.node.args.args, *fn.node.args.kwonlyargs]]
    return {a for a in args if a in ("request", "req", "speech_request")}


@register
class ForwardExtractedParams(Rule):
    """A TTS parameter builder or adapter (`_build_<model>_params`, `TTSModelAdapter.build`) that
    reads a request field into a local variable and never uses it (or only logs it).

    Why: the field silently never reaches the model (voice-cloning `ref_audio`/`ref_text` are the
    usual ones), and vLLM-Omni's pre-commit fails with ruff F841 on the unused variable.

    Fix: forward the value into the params/prompt (`params["prompt_text"] = [ref_text]`), or do not
    extract it.
    """

    id = "OMNI-INT-005"
    name = "forward-extracted-params"
    invariant = "INT"
    severity = "error"
    kinds = frozenset({CODE, MODEL})
    needles = ("def _build_", "def build_", "def build(")
    _S = """
class OmniOpenAIServingSpeech:
    async def _build_demo_tts_params(self, request) -> dict:
        params = {{"text": [request.input]}}
        ref_text = request.ref_text
{line}
        return params
"""
    VALID = [
        Valid(
            _S.format(line='        params["prompt_text"] = [ref_text]'),
            path="vllm_omni/entrypoints/openai/serving_speech.py",
        )
    ]
    INVALID = [
        Invalid(
            _S.format(line='        logger.info("ref_text: %s", ref_text)'),
            path="vllm_omni/entrypoints/openai/serving_speech.py",
            line=5,
            message="never forwarded",
        )
    ]

    def check(self, src: SourceFile):
        for fn in _builders(src):
            reqs = _request_params(fn)
            if not reqs:
                continue
            extracted: dict[str, tuple[ast.AST, str]] = {}
            loads: dict[str, int] = {}
            log_loads: dict[str, int] = {}
            for n in walk(fn.node):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    field = _request_field(n.value, reqs)
                    if field:
                        extracted.setdefault(n.targets[0].id, (n, field))
                elif isinstance(n, ast.Call) and re.search(r"(^|\.)(logger|logging|log)\.", dotted(n.func) + "."):
                    for x in walk(n):
                        if isinstance(x, ast.Name):
                            log_loads[x.id] = log_loads.get(x.id, 0) + 1
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                    loads[n.id] = loads.get(n.id, 0) + 1
            for name, (node, field) in extracted.items():
                if loads.get(name, 0) - log_loads.get(name, 0) <= 0:
                    yield Rule.at(
                        node,
                        f"`{name}` (request.{field}) is extracted in `{fn.qualname}` but never forwarded "
                        "to the model (ruff F841 in vLLM-Omni's pre-commit)",
                    )


def _request_field(node: ast.AST, reqs: set[str]) -> str | None:
    if isinstance(node, ast.BoolOp):
        return _request_field(node.values[0], reqs)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in reqs:
        return node.attr
    if isinstance(node, ast.Call) and dotted(node.func) == "getattr" and len(node.args) >= 2:
        obj, key = node.args[0], node.args[1]
        if isinstance(obj, ast.Name) and obj.id in reqs and isinstance(key, ast.Constant):
            return str(key.value)
    return None


# --- codec device ---------------------------------------------------------------------------------
_DECODE_METHODS = {
    "decode",
    "chunked_decode",
    "decode_codes",
    "codes_to_audio",
    "vocode",
    "decode_code",
    "detokenize_audio",
}
_CODEC_ATTR = re.compile(r"codec|decoder|vocoder|dac|vae|audio_tokenizer|code2wav|token2wav|bigvgan|hifigan", re.I)


# `.<decode method>(` and `self.<name with a codec word>(` (the word case-insensitive), each spelled to
# start with a literal so that the regex engine skips to candidates.
_DECODE_CALL = re.compile(r"\.(?:" + "|".join(sorted(_DECODE_METHODS, key=len, reverse=True)) + r")\s*\(")
_SELF_CODEC_CALL = re.compile(r"self\.\w*(?i:" + _CODEC_ATTR.pattern + r")\w*\s*\(")
_CODEC_WORDS = tuple(_CODEC_ATTR.pattern.split("|"))


def _decodes(text: str) -> bool:
    """Cheap textual test: does a function call a decoder (`.decode(`, `self.vocoder(`)? Substring
    tests first (a decode method, a codec word), the patterns only where they can match."""
    if any(m in text for m in ("decode", "vocode", "codes_to_audio", "detokenize_audio")) and _DECODE_CALL.search(text):
        return True
    # re.I also folds a few non-ASCII letters (U+0131, U+017F, U+212A) that str.lower() keeps.
    if text.isascii():
        low = text.lower()
        if not any(w in low for w in _CODEC_WORDS):
            return False
    for m in _SELF_CODEC_CALL.finditer(text):
        i = m.start()
        if i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"):  # `\bself`
            return True
    return False


class _DeviceWalker(FlowWalker):
    expr_needle = _CODEC_ATTR  # a decoder call names its codec/decoder receiver

    def __init__(self, src, fn, hot, out):
        super().__init__(src.index, fn.node, src.index.class_of(fn), hot, fn_info=fn, lines=src.lines)
        self.out, self.qual, self.src = out, fn.qualname, src

    def on_expr(self, node, env, ctx: Ctx, in_comp):
        if not isinstance(node, ast.Call) or not node.args or ctx.error_path:
            return
        func = node.func
        name = dotted(func)
        target = None
        if (
            isinstance(func, ast.Attribute)
            and func.attr in _DECODE_METHODS
            and _CODEC_ATTR.search(name.rsplit(".", 1)[0] or "")
        ):
            target = name
        elif (
            name.startswith("self.")
            and name.count(".") == 1
            and _CODEC_ATTR.search(func.attr)
            and func.attr not in self.src.index.classes
        ):
            if self.src.index.method(self.src.index.functions[self.qual].cls, func.attr) is None:
                target = name
        if target is None:
            return
        arg = node.args[0]
        kind = self.eval.kind(env, arg)
        if kind in (CPU, COPY, INFO) and id(node) not in self.out:
            where = "read from the request payload (kept on the CPU)" if kind == INFO else "created on the CPU"
            self.out[id(node)] = Rule.at(
                node,
                f"`{target}(...)` in `{self.qual}` decodes codec tensors {where} without moving "
                "them to the decoder's device (`.to(device)`)",
            )


@register
class CodecOnDecoderDevice(Rule):
    """Codec codes handed to a decoder (`self.codec.decode(codes)`, `self.vocoder(codes)`) while
    they still lie where they came from: read out of the per-request payload (which the runner keeps
    on the CPU) or built with `torch.tensor(...)`/`torch.as_tensor(...)` without `device=`.

    Why: the decode either raises a device mismatch or silently runs on the CPU (fish speech: "use
    model device for CUDA stream") — slow audio that no functional test notices.

    Fix: `codes = codes.to(self._device)` (or `device=` at creation) before decoding.
    """

    id = "OMNI-INT-006"
    name = "codec-on-decoder-device"
    invariant = "INT"
    severity = "error"
    needles = ("decode", "codec", "vocoder", "decoder")
    _C = '''
import torch
from vllm_omni.model_executor.models.output_templates import OmniOutput


class Code2Wav(torch.nn.Module):
    def forward(self, input_ids, runtime_additional_information=None, **kwargs):
        """Delta audio."""
        outs = []
        for info in runtime_additional_information or []:
            codes = info["codes"]
{line}
            outs.append(self.codec.decode(codes))
        return OmniOutput(text_hidden_states=None, multimodal_outputs={{"model_outputs": outs}})
'''
    VALID = [Valid(_C.format(line="            codes = codes.to(input_ids.device)"))]
    INVALID = [Invalid(_C.format(line="            codes = codes.long()"), line=13, message="decoder's device")]

    def check(self, src: SourceFile):
        out: dict[int, object] = {}
        # A decoder call in some function is a decoder call in the file's text: most files have none.
        # Otherwise only the per-step functions are asked (the text test, per function, is the cost).
        if not _decodes(src.text):
            return
        for fn, hot in per_step_functions(src.index):
            if _decodes(src.node_text(fn.node)):
                _DeviceWalker(src, fn, hot, out).run()
        yield from sorted(out.values(), key=lambda r: (r.line, r.col))
