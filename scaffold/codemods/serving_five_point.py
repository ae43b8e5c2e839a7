"""The five points of `serving_speech.py` (vLLM-Omni 0.18-0.22), at their real anchors.

1. stage constant `_<M>_TTS_MODEL_STAGES = {"<stage>"}`, inserted just before `_TTS_MODEL_STAGES`;
2. union: `| _<M>_TTS_MODEL_STAGES` appended to `_TTS_MODEL_STAGES`;
3. detection: `if model_stage in _<M>_TTS_MODEL_STAGES: return "<type>"` before the final
   `return None` of `_detect_tts_model_type()`;
4. dispatch in `_validate_tts_request()` before its Qwen3-TTS default return, plus the
   `_validate_<m>_request()` method;
5. the parameter builder `_build_<m>_params()` wired into `_prepare_speech_generation()` (the guide
   says `_create_tts_request()`, which no release has), as an `elif` before the generic Qwen3 `else`
   of the `elif self._is_tts:` branch, plus its log label before `elif self._is_tts:`.
"""

from __future__ import annotations

import ast

import libcst as cst
import libcst.matchers as m
from jinja2 import Environment, StrictUndefined
from libcst.codemod import VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor

from omnitts.scaffold.codemods.base import literal
from omnitts.scaffold.errors import ScaffoldError

CLASS = "OmniOpenAIServingSpeech"
UNION = "_TTS_MODEL_STAGES"

_METHODS = Environment(undefined=StrictUndefined, keep_trailing_newline=True).from_string(
    '''class _Methods:
    def _validate_{{ name }}_request(self, request: OpenAICreateSpeechRequest) -> str | None:
        """Validate a {{ camel }} request. Returns an error message or None."""
        if not request.input or not request.input.strip():
            return "Input text cannot be empty"
        if request.ref_audio is not None:
            return "{{ camel }} does not support voice cloning ('ref_audio')"
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
        return params
'''
)


def stage_constant_name(upper: str) -> str:
    return f"_{upper}_TTS_MODEL_STAGES"


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


def _rebuild(links: list[cst.If], tail) -> cst.If:
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


def existing_stage_keys(source: str) -> dict[str, str]:
    """stage key -> constant name, for every `_X_MODEL_STAGES = {...}` set literal in the module."""
    owners: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.endswith("_MODEL_STAGES") and name != UNION and isinstance(node.value, ast.Set):
                for elt in node.value.elts:
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                        owners.setdefault(elt.value, name)
    return owners


class FivePointServing(VisitorBasedCodemodCommand):
    NEEDS_SOURCE = True
    DESCRIPTION = "Wire a TTS model into serving_speech.py's five integration points."
    ANCHOR = f"{UNION} and class {CLASS}"

    def __init__(self, context, *, name: str, camel: str, upper: str, model_type: str, stage_keys: tuple[str, ...], source: str):
        super().__init__(context)
        self.source = source
        self.name, self.camel, self.model_type, self.stage_keys = name, camel, model_type, stage_keys
        self.constant = stage_constant_name(upper)
        self.done: set[str] = set()
        self.anchor_found = False
        self.has_bounds = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        # Every anchor is a module statement or a method of one class, edited from leave_Module /
        # leave_ClassDef; not descending saves ~90% of the run on a 3,000-line file.
        super().on_visit(node)
        return isinstance(node, cst.Module)

    # -- module level: points 1 and 2 -------------------------------------------------------------
    def visit_Module(self, node: cst.Module) -> None:
        source = self.source
        owners = existing_stage_keys(source)
        for key in self.stage_keys:
            owner = owners.get(key)
            if owner is not None and owner != self.constant:
                raise ScaffoldError(f"stage key {key!r} is already served by {owner} in serving_speech.py; choose --stage-key")
        self.has_bounds = "_TTS_MAX_NEW_TOKENS_MIN" in source and "_TTS_MAX_NEW_TOKENS_MAX" in source
        tree = ast.parse(source)
        self.constant_exists = self.constant in {
            t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
        }
        imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
        self.missing_imports = [(mod, obj) for mod, obj in (("vllm.inputs", "tokens_input"), ("typing", "Any")) if obj not in imported]

    def leave_Module(self, original_node, updated_node):
        body = list(updated_node.body)
        for i, stmt in enumerate(body):
            if m.matches(stmt, m.SimpleStatementLine(body=[m.AnnAssign(target=m.Name(UNION))])):
                self.anchor_found = True
                if not self.constant_exists:
                    keys = ", ".join(f'"{k}"' for k in self.stage_keys)
                    body.insert(i, cst.parse_statement(f"{self.constant} = {{{keys}}}\n"))
                    body[i + 1] = self._extend_union(body[i + 1])
                break
        missing = {"detect", "validate", "prepare", "label", "methods"} - self.done
        if self.anchor_found and missing and not self.constant_exists:
            raise ScaffoldError(f"serving_speech.py: could not find the anchor(s) for {', '.join(sorted(missing))}")
        if not self.constant_exists:
            for module, obj in self.missing_imports:  # AddImportsVisitor re-walks the file: only when needed
                AddImportsVisitor.add_needed_import(self.context, module, obj)
        return updated_node.with_changes(body=body)

    def _extend_union(self, line: cst.SimpleStatementLine) -> cst.SimpleStatementLine:
        ann = line.body[0]
        value = ann.value
        if not isinstance(value, cst.BinaryOperation):
            raise ScaffoldError(f"serving_speech.py: {UNION} is not a `|` union of stage constants")
        new = cst.BinaryOperation(
            left=value.with_changes(lpar=[], rpar=[]),
            operator=value.operator,  # same newline + indent as the other `| _X` lines
            right=cst.Name(self.constant),
            lpar=value.lpar,
            rpar=value.rpar,
        )
        return line.with_changes(body=[ann.with_changes(value=new)])

    # -- class level: points 3, 4, 5 --------------------------------------------------------------
    def leave_ClassDef(self, original_node, updated_node):
        if original_node.name.value != CLASS or self.constant_exists:
            return updated_node
        body = list(updated_node.body.body)
        last_validator = None
        for i, stmt in enumerate(body):
            if not isinstance(stmt, cst.FunctionDef):
                continue
            fname = stmt.name.value
            if fname == "_detect_tts_model_type":
                body[i] = self._before_final_return(stmt, f'if model_stage in {self.constant}:\n    return "{self.model_type}"\n')
                self.done.add("detect")
            elif fname == "_validate_tts_request":
                call = f"    return self._validate_{self.name}_request(request)\n"
                body[i] = self._before_final_return(stmt, f'if self._tts_model_type == "{self.model_type}":\n{call}')
                self.done.add("validate")
            elif fname == "_prepare_speech_generation":
                body[i] = self._wire_prepare(stmt)
            if fname.startswith("_validate_") and fname.endswith("_request") and fname != "_validate_tts_request":
                last_validator = i
        if last_validator is None:
            raise ScaffoldError(f"serving_speech.py: no _validate_<model>_request method in {CLASS}")
        methods = cst.parse_module(_METHODS.render(name=self.name, camel=self.camel, has_max_tokens_bounds=self.has_bounds))
        new_defs = list(cst.ensure_type(methods.body[0], cst.ClassDef).body.body)
        new_defs[0] = new_defs[0].with_changes(leading_lines=[cst.EmptyLine(indent=False)])
        body[last_validator + 1 : last_validator + 1] = new_defs
        self.done.add("methods")
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))

    @staticmethod
    def _before_final_return(func: cst.FunctionDef, snippet: str) -> cst.FunctionDef:
        stmts = list(func.body.body)
        if not stmts or not m.matches(stmts[-1], m.SimpleStatementLine(body=[m.Return()])):
            raise ScaffoldError(f"serving_speech.py: {func.name.value}() does not end with a return statement")
        stmts.insert(len(stmts) - 1, cst.parse_statement(snippet))
        return func.with_changes(body=func.body.with_changes(body=stmts))

    def _wire_prepare(self, func: cst.FunctionDef) -> cst.FunctionDef:
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
            if any(isinstance(x, cst.If) and _is_model_type_compare(x.test) for x in inner) and "prepare" not in self.done:
                stmts[i] = self._wire_builder(links, k)
                self.done.add("prepare")
            elif _assigns(inner, "model_type") and "label" not in self.done:
                label = _model_type_if(self.model_type, f'    model_type = "{self.model_type}"\n')
                stmts[i] = _rebuild(links[:k] + [label], links[k])
                self.done.add("label")
        return func.with_changes(body=func.body.with_changes(body=stmts))

    def _wire_builder(self, links: list[cst.If], k: int) -> cst.If:
        """Add `elif self._tts_model_type == "<t>":` before the generic `else:` inside `elif self._is_tts:`."""
        tts_branch = links[k]
        inner = list(tts_branch.body.body)
        for j, stmt in enumerate(inner):
            if isinstance(stmt, cst.If) and _is_model_type_compare(stmt.test):
                chain = _chain(stmt)
                if not isinstance(chain[-1].orelse, cst.Else):
                    raise ScaffoldError("serving_speech.py: the model-type chain in _prepare_speech_generation has no else")
                branch = _model_type_if(
                    self.model_type,
                    f"    tts_params = await self._build_{self.name}_params(request)\n"
                    "    prompt = tokens_input(prompt_token_ids=[1])\n"
                    '    prompt["additional_information"] = tts_params\n',
                )
                inner[j] = _rebuild(chain, branch.with_changes(orelse=chain[-1].orelse))
                new_branch = tts_branch.with_changes(body=tts_branch.body.with_changes(body=inner))
                return _rebuild(links[:k], new_branch)
        raise ScaffoldError("serving_speech.py: no `if self._tts_model_type == ...` chain under `elif self._is_tts:`")
