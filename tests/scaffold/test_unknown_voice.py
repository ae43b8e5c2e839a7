"""Scaffold bug (issue 10, found by ``omnitts-probe`` on 0.30.0): the generated serving code accepted any ``voice``
and answered HTTP 200 with audio. A voice the model does not offer must be refused with a message (the serving
layer turns a ``validate`` message into a 400). The generated model offers one voice, ``default`` (what the
generated online test sends).

The validation function is compiled out of the scaffolded file (it imports vLLM-Omni's serving, which needs vLLM)
and called on request objects: the adapter's ``validate`` (0.24+ adapter eras) and the five-point era's
``_validate_<model>_request`` patched into ``serving_speech.py`` (0.18-0.22). The engine tier's
``server.bad_requests`` check sends the same request to the real 0.30.0 server.
"""

from __future__ import annotations

import ast
from types import SimpleNamespace

import pytest

from omnitts.knowledge import layout
from omnitts.scaffold.cli import main
from omnitts.scaffold.naming import PATTERNS
from omnitts.validators.backends.texts import UNKNOWN_VOICE

SERVING = "vllm_omni/entrypoints/openai/serving_speech.py"


def _compiled(path, class_name: str, function: str):
    """``function`` of ``class_name`` in ``path``, compiled alone (annotations unevaluated)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == function)
    future = ast.parse("from __future__ import annotations").body
    namespace = {"_TTS_MAX_NEW_TOKENS_MIN": 1, "_TTS_MAX_NEW_TOKENS_MAX": 4096}
    exec(compile(ast.Module(body=[*future, fn], type_ignores=[]), str(path), "exec"), namespace)
    return namespace[function]


def _validator(root, version: str, name: str):
    """The generated request validation of model ``name`` as a function of the request."""
    camel = "".join(part.title() for part in name.split("_"))
    adapter = root / layout.ADAPTERS / f"{name}.py"
    if adapter.is_file():  # 0.24+: the model's adapter
        validate = _compiled(adapter, f"{camel}Adapter", "validate")
        owner = SimpleNamespace(ctx=SimpleNamespace(engine_client=None), max_new_tokens_min=1, max_new_tokens_max=4096)
    else:  # 0.20-0.22: the method patched into serving_speech.py
        validate = _compiled(root / SERVING, "OmniOpenAIServingSpeech", f"_validate_{name}_request")
        owner = SimpleNamespace()
    return lambda **fields: validate(
        owner, SimpleNamespace(**{"input": "Hello.", "ref_audio": None, "max_new_tokens": None, **fields})
    )


@pytest.mark.parametrize("version", ["0.18.0", "0.20.0", "0.24.0", "0.30.0"])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_generated_serving_refuses_an_unknown_voice(work_tree, version, pattern):
    root = work_tree(version)
    name = f"voice_{pattern.replace('-', '_')}"
    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    validate = _validator(root, version, name)

    message = validate(voice=UNKNOWN_VOICE)
    assert message and UNKNOWN_VOICE in message and "default" in message, message
    assert validate(voice=None) is None  # no voice: the model's own
    assert validate(voice="default") is None and validate(voice="Default") is None
    assert validate(input="", voice="default") == "Input text cannot be empty"  # the other checks still run
