"""What a server says about itself, read strictly: the models ``GET /v1/models`` lists (OpenAI's shape), and what
its ``GET /openapi.json`` offers (its paths, the speech request's fields, formats and stream formats).

An answer of the wrong shape raises :class:`Malformed` naming where it is wrong, so a broken or foreign server is one
line, never a traceback in the middle of a check.
"""

from __future__ import annotations

from dataclasses import dataclass


class Malformed(ValueError):
    """A server answer that is not the shape its endpoint has."""


def served_models(doc) -> list[str]:
    """The model ids of a ``/v1/models`` answer: ``{"data": [{"id": "..."}, ...]}``."""
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise Malformed(f"expected an object with a `data` list, got {_shape(doc)}")
    ids = []
    for i, model in enumerate(data):
        ident = model.get("id") if isinstance(model, dict) else None
        if not isinstance(ident, str):
            raise Malformed(f"data[{i}] has no string `id` ({_shape(model)})")
        ids.append(ident)
    return ids


@dataclass(frozen=True)
class SpeechSchema:
    name: str | None  # the speech request's schema in components.schemas (None: none found)
    fields: tuple[str, ...]  # its properties
    formats: tuple[str, ...]  # its response_format enum (empty: not said)
    stream_formats: tuple[str, ...] | None  # its stream_format enum, ("sse",) for `stream` alone; None: not said
    paths: tuple[str, ...] | None  # every path the server routes (None: the document lists none)


def speech_schema(doc) -> SpeechSchema:
    """What an OpenAPI document offers a speech client. The request schema is the one whose name holds ``Speech`` and
    that has an ``input`` property (vLLM-Omni: ``OpenAICreateSpeechRequest``)."""
    if not isinstance(doc, dict):
        raise Malformed(f"expected a JSON object, got {_shape(doc)}")
    paths = doc.get("paths")
    if paths is not None and not isinstance(paths, dict):
        raise Malformed(f"`paths` is {_shape(paths)}, not an object")
    schemas = _object(_object(doc, "components"), "schemas")
    name, props = None, {}
    for key, schema in schemas.items():
        if not isinstance(schema, dict):
            raise Malformed(f"components.schemas.{key} is {_shape(schema)}, not an object")
        found = _object(schema, "properties")
        if "Speech" in key and "input" in found:
            name, props = key, found
            break
    for key, prop in props.items():
        if not isinstance(prop, dict):
            raise Malformed(f"{name}.{key} is {_shape(prop)}, not a schema object")
    stream_formats = None
    if "stream_format" in props:
        stream_formats = _enum(props["stream_format"], f"{name}.stream_format") or ("sse",)
    elif props:
        stream_formats = ("sse",) if "stream" in props else ()
    return SpeechSchema(
        name,
        tuple(sorted(props)),
        _enum(props.get("response_format", {}), f"{name}.response_format"),
        stream_formats,
        tuple(paths) if paths is not None else None,
    )


def _object(parent: dict, key: str) -> dict:
    value = parent.get(key, {})
    if not isinstance(value, dict):
        raise Malformed(f"`{key}` is {_shape(value)}, not an object")
    return value


def _enum(prop: dict, where: str) -> tuple[str, ...]:
    """The allowed values of a schema property (``enum`` directly or inside ``anyOf``/``oneOf``)."""
    options = [prop]
    for key in ("anyOf", "oneOf"):
        more = prop.get(key, [])
        if not isinstance(more, list) or not all(isinstance(o, dict) for o in more):
            raise Malformed(f"{where}.{key} is {_shape(more)}, not a list of schema objects")
        options += more
    for option in options:
        if "enum" in option:
            values = option["enum"]
            if not isinstance(values, list):
                raise Malformed(f"{where}.enum is {_shape(values)}, not a list of values")
            return tuple(v for v in values if isinstance(v, str))  # a null (an optional field) names no format
    return ()


def _shape(value) -> str:
    """A JSON value as a message names it, never the value itself (a server's text stays out of one-line errors)."""
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return kind.get(type(value), "a number")
