"""`serving_speech.py` integration points (vLLM-Omni 0.20-0.26), at their real anchors, with inverses.

Five-point era (0.20-0.22), `FivePointServing`:

1. stage constant `_<M>_TTS_MODEL_STAGES = {"<stage>"}`, inserted just before `_TTS_MODEL_STAGES`;
2. union: `| _<M>_TTS_MODEL_STAGES` appended to `_TTS_MODEL_STAGES`;
3. detection: `if model_stage in _<M>_TTS_MODEL_STAGES: return "<type>"` before the final
   `return None` of `_detect_tts_model_type()`;
4. dispatch in `_validate_tts_request()` before its Qwen3-TTS default return, plus the
   `_validate_<m>_request()` method;
5. the parameter builder `_build_<m>_params()` wired into `_prepare_speech_generation()` (the guide
   says `_create_tts_request()`, which no release has), as an `elif` before the generic Qwen3 `else`
   of the `elif self._is_tts:` branch, plus its log label before `elif self._is_tts:`.

Hybrid era (0.24-0.26), `HybridServing`: points 1-3 only; validation and request building belong to
the model's adapter (`tts_adapters/<m>.py`), resolved by the detected type (= the adapter's `name`).

`RemoveFivePointServing` / `RemoveHybridServing` are their exact inverses. Every anchor is a module
statement or a method of `OmniOpenAIServingSpeech`, located with `ast` and edited alone (slices.py):
the file is never parsed whole by libcst.
"""

from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m
from jinja2 import Environment, StrictUndefined
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from omnitts.scaffold.codemods.base import literal
from omnitts.scaffold.codemods.slices import (
    Edit,
    apply_edits,
    class_body,
    class_def,
    edit_method,
    first_line,
    method,
    module_assignment,
    parse_ast,
    with_class_body,
)
from omnitts.scaffold.errors import ScaffoldError

CLASS = "OmniOpenAIServingSpeech"
UNION = "_TTS_MODEL_STAGES"
DETECT = "_detect_tts_model_type"
VALIDATE = "_validate_tts_request"
PREPARE = "_prepare_speech_generation"

_METHODS = Environment(undefined=StrictUndefined, keep_trailing_newline=True).from_string(
    '''class _Methods:
    def _validate_{{ name }}_request(self, request: OpenAICreateSpeechRequest) -> str | None:
        """Validate a {{ camel }} request. Returns an error message or None."""
        if not request.input or not request.input.strip():
            return "Input text cannot be empty"
        # The voices the model offers; any other `voice` gets a 400 rather than audio in a voice nobody asked for.
        if request.voice is not None and request.voice.lower() not in {"default"}:
            return f"Invalid voice '{request.voice}'. Supported: default"
{%- if voice_cloning %}
        if request.ref_audio is not None:
            fmt_err = self._validate_ref_audio_format(request.ref_audio)
            if fmt_err:
                return fmt_err
{%- else %}
        if request.ref_audio is not None:
            return "{{ camel }} does not support voice cloning ('ref_audio')"
{%- endif %}
{%- if has_max_tokens_bounds %}
        if request.max_new_tokens is not None:
            if request.max_new_tokens < _TTS_MAX_NEW_TOKENS_MIN:
                return f"max_new_tokens must be at least {_TTS_MAX_NEW_TOKENS_MIN}"
            if request.max_new_tokens > _TTS_MAX_NEW_TOKENS_MAX:
                return f"max_new_tokens cannot exceed {_TTS_MAX_NEW_TOKENS_MAX}"
{%- endif %}
        return None

    async def _build_{{ name }}_params(self, request: OpenAICreateSpeechRequest) -> dict[str, Any]:
        """Build additional_information for {{ camel }}: only the fields the model reads."""
        params: dict[str, Any] = {"text": [request.input]}
        if request.max_new_tokens is not None:
            params["max_new_tokens"] = [request.max_new_tokens]
{%- if voice_cloning %}
        if request.ref_audio is not None:
            wav_list, sr = await self._resolve_ref_audio(request.ref_audio)
            params["ref_audio"] = [[wav_list, sr]]
            if request.ref_text:
                params["ref_text"] = [request.ref_text]
{%- endif %}
        return params
'''
)


def stage_constant_name(upper: str) -> str:
    return f"_{upper}_TTS_MODEL_STAGES"


# -- matching helpers ------------------------------------------------------------------------------
def _is_model_type_compare(test: cst.BaseExpression, value: str | None = None) -> bool:
    """`self._tts_model_type == "<value>"` (any value when `value` is None)."""
    if not m.matches(
        test,
        m.Comparison(
            left=m.Attribute(value=m.Name("self"), attr=m.Name("_tts_model_type")),
            comparisons=[m.ComparisonTarget(operator=m.Equal(), comparator=m.SimpleString())],
        ),
    ):
        return False
    return value is None or literal(test.comparisons[0].comparator) == value


def _is_self_attr(test: cst.BaseExpression, attr: str) -> bool:
    return m.matches(test, m.Attribute(value=m.Name("self"), attr=m.Name(attr)))


def _chain(node: cst.If) -> list[cst.If]:
    links = [node]
    while isinstance(links[-1].orelse, cst.If):
        links.append(links[-1].orelse)
    return links


def _rebuild(links: list[cst.If], tail) -> cst.BaseStatement:
    node = tail
    for link in reversed(links):
        node = link.with_changes(orelse=node)
    return node


def _assigns(stmts, name: str) -> bool:
    """True when the block is exactly one `name = ...` statement (the log-label chain's branches)."""
    target = m.AssignTarget(m.Name(name))
    return len(stmts) == 1 and m.matches(stmts[0], m.SimpleStatementLine(body=[m.Assign(targets=[target])]))


def _model_type_if(model_type: str, body_src: str) -> cst.If:
    return cst.ensure_type(cst.parse_statement(f'if self._tts_model_type == "{model_type}":\n{body_src}'), cst.If)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def existing_stage_keys(source: str | ast.Module) -> dict[str, str]:
    """stage key -> constant name, for every `_X_MODEL_STAGES = {...}` set literal in the module."""
    tree = ast.parse(source) if isinstance(source, str) else source
    owners: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.endswith("_MODEL_STAGES") and name != UNION and isinstance(node.value, ast.Set):
                for elt in node.value.elts:
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                        owners.setdefault(elt.value, name)
    return owners


def _module_names(tree: ast.Module) -> set[str]:
    return {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}


def _anchors(tree: ast.Module, rel: str):
    union = module_assignment(tree, UNION)
    if union is None or not isinstance(union, ast.AnnAssign):
        raise ScaffoldError(
            f"{rel}: anchor `{UNION}: set[str] = ...` not found; this tree's layout is not the one detected"
        )
    cls = class_def(tree, CLASS)
    if cls is None:
        raise ScaffoldError(f"{rel}: anchor class {CLASS} not found; this tree's layout is not the one detected")
    return union, cls


def _span(node: ast.stmt) -> tuple[int, int]:
    return first_line(node) - 1, node.end_lineno


# -- points 1-2: stage constant + union ------------------------------------------------------------
def _add_constant(constant: str, keys: tuple[str, ...]):
    def edit(module: cst.Module) -> cst.Module:
        line = cst.ensure_type(module.body[0], cst.SimpleStatementLine)
        ann = line.body[0]
        value = ann.value
        if not isinstance(value, cst.BinaryOperation):
            raise ScaffoldError(f"serving_speech.py: {UNION} is not a `|` union of stage constants")
        new_value = cst.BinaryOperation(
            left=value.with_changes(lpar=[], rpar=[]),
            operator=value.operator,  # same newline + indent as the other `| _X` lines
            right=cst.Name(constant),
            lpar=value.lpar,
            rpar=value.rpar,
        )
        if "\n" not in module.code_for_node(value.with_changes(lpar=[], rpar=[])):  # operands on one line (0.18):
            # the grown union re-shaped as ruff format would; a one-per-line union (0.20+) keeps its layout
            new_value = _formatted_union([*_cst_operands(value), constant])
        quoted = ", ".join(f'"{k}"' for k in keys)
        new_constant = cst.parse_statement(f"{constant} = {{{quoted}}}\n")
        return module.with_changes(body=[new_constant, line.with_changes(body=[ann.with_changes(value=new_value)])])

    return edit


_UNION_HEAD = f"{UNION}: set[str] = "  # the annotated assignment every five-point / hybrid release has


def _cst_operands(value: cst.BaseExpression) -> list[str]:
    if isinstance(value, cst.BinaryOperation):
        return _cst_operands(value.left) + _cst_operands(value.right)
    return [cst.ensure_type(value, cst.Name).value]


def _formatted_union(names: list[str]) -> cst.BaseExpression:
    """`A | B | ...` in ruff format's shape at line length 120: one line, else one line in parentheses, else
    one operand per line (how 0.20+ write it)."""
    flat = " | ".join(names)
    if len(_UNION_HEAD) + len(flat) <= 120:
        return cst.parse_expression(flat)
    if 4 + len(flat) <= 120:
        return cst.parse_expression(f"(\n    {flat}\n)")
    return cst.parse_expression("(\n    " + "\n    | ".join(names) + "\n)")


def _reshaped(value: cst.BaseExpression) -> cst.BaseExpression:
    """After an operand is dropped: the one-line shapes come back where they fit (`_add_constant` made them);
    a union still too long for one line keeps its own layout (and comments) untouched."""
    names = _cst_operands(value)
    if 4 + len(" | ".join(names)) <= 120:
        return _formatted_union(names)
    return value


def _remove_constant(constant: str):
    def edit(module: cst.Module) -> cst.Module:
        body = list(module.body)
        index = next(
            i
            for i, s in enumerate(body)
            if m.matches(s, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name(constant))])]))
        )
        body.pop(index)
        line = body[-1]
        ann = line.body[0]
        return module.with_changes(
            body=[
                *body[:-1],
                line.with_changes(body=[ann.with_changes(value=_reshaped(_drop_operand(ann.value, constant)))]),
            ]
        )

    return edit


def _drop_operand(value: cst.BaseExpression, constant: str) -> cst.BaseExpression:
    """`A | B | C` without `C` (or `B`), restoring the parentheses and line breaks `_add_constant` moved."""
    if not isinstance(value, cst.BinaryOperation):
        raise ScaffoldError(f"serving_speech.py: {UNION} is not a `|` union of stage constants")
    if m.matches(value.right, m.Name(constant)):
        return value.left.with_changes(lpar=value.lpar, rpar=value.rpar)
    return value.with_changes(left=_drop_operand(value.left, constant))


def _union_operands(node: ast.expr) -> list[str]:
    if isinstance(node, ast.BinOp):
        return _union_operands(node.left) + _union_operands(node.right)
    return [node.id] if isinstance(node, ast.Name) else []


# -- point 3: detection; point 4: validation dispatch ----------------------------------------------
def _before_final_return(func: cst.FunctionDef, snippet: str) -> cst.FunctionDef:
    stmts = list(func.body.body)
    if not stmts or not m.matches(stmts[-1], m.SimpleStatementLine(body=[m.Return()])):
        raise ScaffoldError(f"serving_speech.py: {func.name.value}() does not end with a return statement")
    stmts.insert(len(stmts) - 1, cst.parse_statement(snippet))
    return func.with_changes(body=func.body.with_changes(body=stmts))


def _drop_statement(func: cst.FunctionDef, snippet: str) -> cst.FunctionDef:
    """Remove the top-level statement of `func` whose code is exactly `snippet` (what was inserted)."""
    stmts = list(func.body.body)
    target = cst.parse_statement(snippet)
    for i, stmt in enumerate(stmts):
        if stmt.deep_equals(target):
            return func.with_changes(body=func.body.with_changes(body=stmts[:i] + stmts[i + 1 :]))
    return func


def _detect_snippet(constant: str, model_type: str) -> str:
    return f'if model_stage in {constant}:\n    return "{model_type}"\n'


def _validate_snippet(name: str, model_type: str) -> str:
    return f'if self._tts_model_type == "{model_type}":\n    return self._validate_{name}_request(request)\n'


# -- point 5: builder + log label in _prepare_speech_generation ------------------------------------
def _builder_branch(name: str, model_type: str, tokens: bool = True) -> cst.If:
    """The model's branch; `tokens`: the tree builds prompts with `tokens_input` (0.20+), else with a plain
    dict as its own Qwen3-TTS path does (0.18 imports no `tokens_input`)."""
    prompt = (
        '    prompt = tokens_input(prompt_token_ids=[1])\n    prompt["additional_information"] = tts_params\n'
        if tokens
        else '    prompt = {"prompt_token_ids": [1], "additional_information": tts_params}\n'
    )
    return _model_type_if(model_type, f"    tts_params = await self._build_{name}_params(request)\n{prompt}")


def _label_branch(model_type: str) -> cst.If:
    return _model_type_if(model_type, f'    model_type = "{model_type}"\n')


def _wire_prepare(
    func: cst.FunctionDef, name: str, model_type: str, done: set[str], tokens: bool = True
) -> cst.FunctionDef:
    stmts = list(func.body.body)
    for i, stmt in enumerate(stmts):
        if not isinstance(stmt, cst.If):
            continue
        links = _chain(stmt)
        tts = [k for k, link in enumerate(links) if _is_self_attr(link.test, "_is_tts")]
        if not tts:
            continue
        k = tts[0]
        inner = links[k].body.body
        if any(isinstance(x, cst.If) and _is_model_type_compare(x.test) for x in inner) and "prepare" not in done:
            stmts[i] = _wire_builder(links, k, name, model_type, tokens)
            done.add("prepare")
        elif _assigns(inner, "model_type") and "label" not in done:
            stmts[i] = _rebuild(links[:k] + [_label_branch(model_type)], links[k])
            done.add("label")
    return func.with_changes(body=func.body.with_changes(body=stmts))


def _wire_builder(links: list[cst.If], k: int, name: str, model_type: str, tokens: bool = True) -> cst.BaseStatement:
    """Add `elif self._tts_model_type == "<t>":` before the generic `else:` inside `elif self._is_tts:`."""
    tts_branch = links[k]
    inner = list(tts_branch.body.body)
    for j, stmt in enumerate(inner):
        if isinstance(stmt, cst.If) and _is_model_type_compare(stmt.test):
            chain = _chain(stmt)
            if not isinstance(chain[-1].orelse, cst.Else):
                raise ScaffoldError("serving_speech.py: the model-type chain in _prepare_speech_generation has no else")
            branch = _builder_branch(name, model_type, tokens)
            inner[j] = _rebuild(chain, branch.with_changes(orelse=chain[-1].orelse))
            new_branch = tts_branch.with_changes(body=tts_branch.body.with_changes(body=inner))
            return _rebuild(links[:k], new_branch)
    raise ScaffoldError("serving_speech.py: no `if self._tts_model_type == ...` chain under `elif self._is_tts:`")


def _unlink(chain_head: cst.If, branch: cst.If) -> cst.BaseStatement | None:
    """The chain without the link equal to `branch` (None when no such link)."""
    links = _chain(chain_head)
    for k, link in enumerate(links):
        if k > 0 and link.with_changes(orelse=None).deep_equals(branch.with_changes(orelse=None)):
            return _rebuild(links[:k], link.orelse)
    return None


def _unwire_prepare(func: cst.FunctionDef, name: str, model_type: str) -> cst.FunctionDef:
    builders, label = [_builder_branch(name, model_type, t) for t in (True, False)], _label_branch(model_type)
    stmts = list(func.body.body)
    for i, stmt in enumerate(stmts):
        if not isinstance(stmt, cst.If):
            continue
        unlabelled = _unlink(stmt, label)
        if unlabelled is not None:
            stmts[i] = stmt = unlabelled
        links = _chain(stmt)
        for k, link in enumerate(links):
            if not _is_self_attr(link.test, "_is_tts"):
                continue
            inner = list(link.body.body)
            for j, x in enumerate(inner):
                unwired = next(
                    (u for b in builders if isinstance(x, cst.If) and (u := _unlink(x, b)) is not None), None
                )
                if unwired is not None:
                    inner[j] = unwired
                    links[k] = link.with_changes(body=link.body.with_changes(body=inner))
                    stmts[i] = _rebuild(links[: k + 1], links[k].orelse)
                    break
    return func.with_changes(body=func.body.with_changes(body=stmts))


def _method_defs(name: str, camel: str, *, has_bounds: bool, voice_cloning: bool) -> list[cst.BaseStatement]:
    source = _METHODS.render(name=name, camel=camel, has_max_tokens_bounds=has_bounds, voice_cloning=voice_cloning)
    defs = list(cst.ensure_type(cst.parse_module(source).body[0], cst.ClassDef).body.body)
    defs[0] = defs[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    return defs


# -- the commands ----------------------------------------------------------------------------------
def _check_keys(tree: ast.Module, constant: str, stage_keys: tuple[str, ...]) -> None:
    owners = existing_stage_keys(tree)
    for key in stage_keys:
        owner = owners.get(key)
        if owner is not None and owner != constant:
            raise ScaffoldError(
                f"stage key {key!r} is already served by {owner} in serving_speech.py; choose --stage-key"
            )


class FivePointServing:
    """Wire a TTS model into serving_speech.py's five integration points (0.20-0.22)."""

    POINTS = ("constant", "union", "detect", "validate", "prepare", "label", "methods")

    @classmethod
    def apply_text(
        cls,
        source: str,
        rel: str,
        *,
        name: str,
        camel: str,
        upper: str,
        model_type: str,
        stage_keys: tuple[str, ...],
        voice_cloning: bool = False,
        points: tuple[str, ...] | None = None,
    ) -> str:
        points = cls.POINTS if points is None else points
        tree = parse_ast(source, rel)
        constant = stage_constant_name(upper)
        _check_keys(tree, constant, stage_keys)
        if constant in _module_names(tree):
            return source  # idempotent: the model is wired already
        union, klass = _anchors(tree, rel)
        tokens = "tokens_input(" in source  # how the tree builds prompts (0.18: plain dicts)
        edits = [Edit(*_span(union), _add_constant(constant, stage_keys))]
        done = {"constant", "union"}
        wired: set[str] = set()  # filled while the prepare edit runs

        detect = method(klass, DETECT)
        if detect is not None:
            snippet = _detect_snippet(constant, model_type)
            edits.append(
                Edit(
                    *_span(detect),
                    lambda mod: edit_method(mod, DETECT, lambda f: _before_final_return(f, snippet)),
                    True,
                )
            )
            done.add("detect")
        if "validate" in points:
            validate = method(klass, VALIDATE)
            if validate is not None:
                snippet_v = _validate_snippet(name, model_type)
                edits.append(
                    Edit(
                        *_span(validate),
                        lambda mod: edit_method(mod, VALIDATE, lambda f: _before_final_return(f, snippet_v)),
                        True,
                    )
                )
                done.add("validate")
        if "prepare" in points:
            prepare = method(klass, PREPARE)
            if prepare is not None:
                edits.append(
                    Edit(
                        *_span(prepare),
                        lambda mod: edit_method(
                            mod, PREPARE, lambda f: _wire_prepare(f, name, model_type, wired, tokens)
                        ),
                        True,
                    )
                )
        if "methods" in points:
            validators = [
                n
                for n in klass.body
                if isinstance(n, ast.FunctionDef)
                and n.name.startswith("_validate_")
                and n.name.endswith("_request")
                and n.name != VALIDATE
            ]
            if not validators:
                raise ScaffoldError(f"serving_speech.py: no _validate_<model>_request method in {CLASS}")
            has_bounds = "_TTS_MAX_NEW_TOKENS_MIN" in source and "_TTS_MAX_NEW_TOKENS_MAX" in source
            new_defs = _method_defs(name, camel, has_bounds=has_bounds, voice_cloning=voice_cloning)
            last = validators[-1]

            def add_methods(mod: cst.Module) -> cst.Module:
                return with_class_body(mod, [*class_body(mod), *new_defs])

            edits.append(Edit(*_span(last), add_methods, True))
            done.add("methods")
        out = apply_edits(source, edits, rel)
        done |= wired
        missing = set(points) - done
        if missing:
            raise ScaffoldError(f"serving_speech.py: could not find the anchor(s) for {', '.join(sorted(missing))}")
        if "prepare" in points or "methods" in points:
            out = _add_missing_imports(out, rel, tree, tokens)
        return out


def _add_missing_imports(source: str, rel: str, tree: ast.Module, tokens: bool = True) -> str:
    """`tokens_input` and `Any` are imported by every five-point release; add them only when absent.

    `tree` is the file before the edits (which add no imports), so it is not parsed again.
    """
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    needed = (("vllm.inputs", "tokens_input"), ("typing", "Any")) if tokens else (("typing", "Any"),)
    missing = [(mod, obj) for mod, obj in needed if obj not in imported]
    if not missing:
        return source
    context = CodemodContext(filename=rel)
    for module, obj in missing:  # AddImportsVisitor re-walks the whole file: only when needed
        AddImportsVisitor.add_needed_import(context, module, obj)
    return AddImportsVisitor(context).transform_module(cst.parse_module(source)).code


class HybridServing:
    """Points 1-3 of the hybrid era (0.24-0.26): stage constant, union, detection."""

    @classmethod
    def apply_text(cls, source: str, rel: str, **kwargs) -> str:
        kwargs.pop("voice_cloning", None)
        return FivePointServing.apply_text(source, rel, points=("constant", "union", "detect"), **kwargs)


class RemoveFivePointServing:
    """The exact inverse of FivePointServing (and, with `points`, of HybridServing)."""

    @classmethod
    def apply_text(
        cls,
        source: str,
        rel: str,
        *,
        name: str,
        upper: str,
        model_type: str,
        points: tuple[str, ...] = FivePointServing.POINTS,
        **_ignored,
    ) -> str:
        tree = parse_ast(source, rel)
        constant = stage_constant_name(upper)
        const_node = module_assignment(tree, constant)
        if const_node is None:
            return source
        union, klass = _anchors(tree, rel)
        if constant not in _union_operands(union.value):
            raise ScaffoldError(f"{rel}: {constant} is not part of {UNION}; wired by hand, left alone")
        edits = [Edit(first_line(const_node) - 1, union.end_lineno, _remove_constant(constant))]
        detect = method(klass, DETECT)
        if detect is not None:
            snippet = _detect_snippet(constant, model_type)
            edits.append(
                Edit(*_span(detect), lambda mod: edit_method(mod, DETECT, lambda f: _drop_statement(f, snippet)), True)
            )
        if "validate" in points and (validate := method(klass, VALIDATE)) is not None:
            snippet_v = _validate_snippet(name, model_type)
            edits.append(
                Edit(
                    *_span(validate),
                    lambda mod: edit_method(mod, VALIDATE, lambda f: _drop_statement(f, snippet_v)),
                    True,
                )
            )
        if "prepare" in points and (prepare := method(klass, PREPARE)) is not None:
            edits.append(
                Edit(
                    *_span(prepare),
                    lambda mod: edit_method(mod, PREPARE, lambda f: _unwire_prepare(f, name, model_type)),
                    True,
                )
            )
        if "methods" in points:
            ours = {f"_validate_{name}_request", f"_build_{name}_params"}
            indices = [
                i
                for i, n in enumerate(klass.body)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in ours
            ]
            if indices and indices[0] > 0:
                start = first_line(klass.body[indices[0] - 1]) - 1
                end = klass.body[indices[-1]].end_lineno

                def drop_methods(mod: cst.Module) -> cst.Module:
                    body = [s for s in class_body(mod) if not (isinstance(s, cst.FunctionDef) and s.name.value in ours)]
                    return with_class_body(mod, body)

                edits.append(Edit(start, end, drop_methods, True))
        return apply_edits(source, edits, rel)


class RemoveHybridServing:
    @classmethod
    def apply_text(cls, source: str, rel: str, **kwargs) -> str:
        return RemoveFivePointServing.apply_text(source, rel, points=("constant", "union", "detect"), **kwargs)
