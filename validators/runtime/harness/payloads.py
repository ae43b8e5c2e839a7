"""Payloads the way the release handles them: flattened keys (``codes.audio``), one element per request cut out of
the batch output (``utils/mm_outputs.to_payload_element``), and ``OmniOutput`` extraction."""

from __future__ import annotations

from typing import Any

import torch

from omnitts.validators.runtime.harness.errors import ContractError

_NESTED = frozenset({"hidden_states", "embed", "ids", "codes", "meta"})


def flatten_payload(payload: dict) -> dict:
    flat: dict[str, Any] = {}
    for key, value in (payload or {}).items():
        if key in _NESTED and isinstance(value, dict):
            for qual, val in value.items():
                if qual == "layers" and key == "hidden_states" and isinstance(val, dict):
                    for layer, t in val.items():
                        flat[f"hidden_states.layer_{layer}"] = t
                else:
                    flat[f"{key}.{qual}"] = val
        else:
            flat[key] = value
    return flat


def unflatten_payload(flat: dict) -> dict:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if "." in key:
            head, tail = key.split(".", 1)
            out.setdefault(head, {})[tail] = value
        else:
            out[key] = value
    return out


def is_payload_struct(obj: Any) -> bool:
    """True for a ``vllm_omni.data_entry_keys.OmniPayloadStruct`` (a msgspec struct: ``__struct_fields__``), read by
    protocol so that the harness needs neither msgspec nor vLLM-Omni."""
    return type(obj).__name__ == "OmniPayloadStruct" and hasattr(type(obj), "__struct_fields__")


def struct_to_dict(obj: Any) -> Any:
    """What crosses the connector from a msgspec payload struct: its fields that are set (not None), nested structs
    as dicts (the receiving adapter reads dict keys: ``payload_data.get("codes", {}).get("audio")``)."""
    fields = getattr(type(obj), "__struct_fields__", None)
    if fields is None:
        return obj
    out = {}
    for name in fields:
        value = getattr(obj, name)
        if value is not None:
            out[name] = struct_to_dict(value)
    return out


def payload_element(element: Any, idx: int, start: int, end: int, seq_len: int | None) -> Any:
    """Request ``idx``'s share of one batch output: token-aligned tensors sliced, lists indexed, others shared."""
    if seq_len is not None and isinstance(element, torch.Tensor) and element.dim() > 0 and element.shape[0] == seq_len:
        return element[start:end]
    if isinstance(element, dict):
        return {k: (v[start:end] if isinstance(v, torch.Tensor) else v) for k, v in element.items()}
    if isinstance(element, list):
        if not element:
            return element
        item = element[idx] if idx < len(element) else element[0]
        return item.clone() if isinstance(item, torch.Tensor) else item
    if isinstance(element, torch.Tensor):
        return element.clone()
    return element


def leaves(x: Any, prefix: str):
    """``(dotted name, tensor)`` for every tensor inside ``x``."""
    if isinstance(x, torch.Tensor):
        yield prefix or "<tensor>", x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from leaves(v, f"{prefix}[{i}]")


def count_frames(flat: dict) -> int | None:
    """Frames in one request's step payload: valid rows of ``codes.audio`` (stop frames are negative) or of
    ``latent``; None when the payload carries neither."""
    for key in ("codes.audio", "latent"):
        val = flat.get(key)
        if isinstance(val, list):
            val = [v for v in val if isinstance(v, torch.Tensor)]
            val = torch.cat([v.reshape(-1, v.shape[-1]) for v in val if v.dim() > 0]) if val else None
        if not isinstance(val, torch.Tensor):
            continue
        if val.numel() == 0:
            return 0
        rows = val.reshape(-1, val.shape[-1]) if val.dim() >= 2 else val.reshape(1, -1)
        if key == "codes.audio":
            return int((rows.min(dim=-1).values >= 0).sum())
        return int(rows.shape[0])
    return None


def is_omni_output(x: Any) -> bool:
    return hasattr(x, "multimodal_outputs") and hasattr(x, "text_hidden_states")


def extract(model: Any, out: Any) -> tuple[Any, dict]:
    """``OmniGPUModelRunner.extract_multimodal_outputs`` (0.20.0 gpu_model_runner.py)."""
    if getattr(model, "have_multimodal_outputs", False) and is_omni_output(out):
        return out.text_hidden_states, (out.multimodal_outputs or {})
    if isinstance(out, torch.Tensor):
        return out, {}
    if isinstance(out, (list, tuple)):
        return out[0], {}
    raise ContractError(f"forward() returned {type(out).__name__}; the runner accepts OmniOutput, Tensor or list")


def split_generation_output(mm: Any, n: int) -> list[dict]:
    """The generation runner's per-request split: one entry per request for lists (and batched tensors when the
    decoder returns a bare tensor), a tensor value of a dict shared by every request."""
    per_req: list[dict] = [{} for _ in range(n)]
    if isinstance(mm, torch.Tensor):
        if mm.shape[0] != n:
            raise ContractError(f"decoder returned one tensor of batch {mm.shape[0]} for {n} requests")
        return [{"model_outputs": mm[i]} for i in range(n)]
    if isinstance(mm, list):
        if len(mm) != n:
            raise ContractError(f"decoder returned a list of {len(mm)} outputs for {n} requests")
        return [{"model_outputs": x} for x in mm]
    if isinstance(mm, dict):
        for key, val in mm.items():
            if isinstance(val, list):
                if len(val) != n:
                    raise ContractError(
                        f"multimodal output list for key {key!r} has length {len(val)} but the batch has {n}"
                        " requests (gpu_generation_model_runner requires one entry per request)"
                    )
                for i in range(n):
                    per_req[i][key] = val[i]
            elif isinstance(val, torch.Tensor):
                for i in range(n):
                    per_req[i][key] = val
    return per_req
