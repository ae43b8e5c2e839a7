"""The declared, versioned schema observations cross process boundaries in (engine subprocess, worker RPC).

An observation is a frozen dataclass registered with :func:`observation`; :func:`dump` turns one into JSON (arrays
as ``.npy`` files beside it, or inline base64 where there is no folder, e.g. an RPC answer) and :func:`load` turns it
back into the same class, its fields typed by the class's annotations. A document of another schema version is
refused in one line: both ends must run the same omnitts. Only the standard library and numpy: this module runs in
the engine's environment and inside its workers.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import types
import typing
from pathlib import Path

import numpy as np

SCHEMA = "omnitts.observations"
VERSION = 1

_TYPES: dict[str, type] = {}


class SchemaError(ValueError):
    """A document that is not an observation of this schema version (one line)."""


def observation(cls):
    """Class decorator: a frozen dataclass that :func:`dump` and :func:`load` know by its name."""
    cls = dataclasses.dataclass(frozen=True)(cls)
    if _TYPES.setdefault(cls.__name__, cls) is not cls:
        raise TypeError(f"two observation types named {cls.__name__}")
    return cls


def dump(obj, arrays: Path | None = None) -> dict:
    """The JSON document of ``obj``; arrays go to ``arrays/<n>.npy`` when a folder is given, else inline."""
    if type(obj).__name__ not in _TYPES:
        raise TypeError(f"{type(obj).__name__} is not an observation type")
    if arrays is not None:
        Path(arrays).mkdir(parents=True, exist_ok=True)
    counter = itertools.count()
    return {"schema": SCHEMA, "version": VERSION, "type": type(obj).__name__, "data": _enc(obj, arrays, counter)}


def load(doc: dict, arrays: Path | None = None):
    """The observation ``doc`` holds (``arrays``: the folder its ``.npy`` files are in)."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise SchemaError(f"not an {SCHEMA} document: {str(doc)[:120]}")
    if doc.get("version") != VERSION:
        raise SchemaError(
            f"{SCHEMA} version {doc.get('version')} where this omnitts reads version {VERSION}: "
            "the engine side runs another omnitts"
        )
    cls = _TYPES.get(doc.get("type"))
    if cls is None:
        raise SchemaError(f"unknown observation type {doc.get('type')!r}")
    return _dec(cls, doc["data"], arrays)


def _enc(value, arrays: Path | None, counter):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _enc(getattr(value, f.name), arrays, counter) for f in dataclasses.fields(value)}
    if isinstance(value, np.ndarray):
        if arrays is not None:
            name = f"{next(counter)}.npy"
            np.save(Path(arrays) / name, value, allow_pickle=False)
            return {"npy": name}
        data = np.ascontiguousarray(value)
        return {"b64": base64.b64encode(data.tobytes()).decode(), "dtype": data.dtype.str, "shape": list(data.shape)}
    if isinstance(value, (list, tuple)):
        return [_enc(v, arrays, counter) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_enc(v, arrays, counter) for v in value)
    if isinstance(value, dict):
        return {str(k): _enc(v, arrays, counter) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _array(value: dict, arrays: Path | None) -> np.ndarray:
    if "npy" in value:
        if arrays is None:
            raise SchemaError("an array stored as a file, but no folder to read it from")
        return np.load(Path(arrays) / value["npy"], allow_pickle=False)
    raw = base64.b64decode(value["b64"])
    return np.frombuffer(raw, dtype=np.dtype(value["dtype"])).reshape(value["shape"]).copy()


def _dec(tp, value, arrays: Path | None):
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return _dec(options[0], value, arrays) if len(options) == 1 else value
    if tp is np.ndarray:
        return _array(value, arrays)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        return tp(**{k: _dec(hints[k], v, arrays) for k, v in value.items() if k in known})
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_dec(args[0], v, arrays) for v in value)
        return tuple(_dec(a, v, arrays) for a, v in zip(args, value, strict=True))
    if origin is list:
        (arg,) = typing.get_args(tp)
        return [_dec(arg, v, arrays) for v in value]
    if origin in (frozenset, set):
        (arg,) = typing.get_args(tp)
        return frozenset(_dec(arg, v, arrays) for v in value)
    if origin is dict:
        key, val = typing.get_args(tp)
        return {key(k): _dec(val, v, arrays) for k, v in value.items()}
    return value
