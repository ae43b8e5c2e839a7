"""Requests built the way the release's own serving adapter builds them (runs inside the engine environment).

A model whose stage 0 builds its prompt embeddings from ``additional_information`` (Qwen3-TTS) takes a prompt of
placeholder ids whose COUNT must equal the embeddings' length: the release's serving adapter computes it with the
function ``omnitts.knowledge.upstream.prompt_length`` names, imported here from the tree at run time (never copied).
A placeholder too short cuts the end of the text (two texts that differ only at their end gave the same audio with
the raw text's token count); a fixed one (``[0] * 8``) leaves the text out of the talker's prompt altogether.

:func:`builder` returns ``build(text, params) -> request`` for such a model, None for the others (their prompt is
their tokenized text). ``params`` are the request fields the serving adapter fills from the speech request (task
type, speaker, language, instructions, max_new_tokens), each list-wrapped as it sends them.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from omnitts.knowledge import upstream

# What the release's serving adapter sends when the speech request leaves a field out (0.30.0
# tts_adapters/qwen3_tts._build_tts_params: task type CustomVoice, language Auto, empty instructions,
# max_new_tokens 2048).
_QWEN3_DEFAULTS = {"task_type": "CustomVoice", "language": "Auto", "instruct": "", "max_new_tokens": 2048}


def _function(path: str):
    module, _, qualname = path.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def builder(release: str | None, model: str, model_dir: Path):
    """``build(text, params) -> {"prompt_token_ids": [1] * n, "additional_information": {...}}`` for ``model``,
    or None where the release has no prompt-length function for it."""
    path = upstream.prompt_length(release, model)
    if path is None:
        return None
    estimate = _function(path)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), trust_remote_code=True, padding_side="left")
    talker = json.loads((Path(model_dir) / "config.json").read_text()).get("talker_config", {})

    def build(text: str, params: dict | None = None) -> dict:
        fields = {**_QWEN3_DEFAULTS, **(params or {})}
        info = {"text": [text], **{key: [value] for key, value in fields.items()}}
        length = estimate(
            additional_information=info,
            task_type=fields["task_type"],
            tokenize_prompt=lambda t: tokenizer(t, padding=False)["input_ids"],
            codec_language_id=talker.get("codec_language_id"),
            spk_is_dialect=talker.get("spk_is_dialect"),
        )
        return {"prompt_token_ids": [1] * int(length), "additional_information": info}

    return build
