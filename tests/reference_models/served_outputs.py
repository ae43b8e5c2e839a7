"""Reading the harness's per-request results the way the reference-model tests compare them."""

from __future__ import annotations

import torch


def final_value(result, key: str):
    """A key of the request's offline (consolidated) output, as ``engine.generate()`` hands it to a consumer;
    ``codes.audio`` reads the nested ``codes`` dict the 0.20 consolidation keeps."""
    value = result.offline
    if key in value:
        return value[key]
    for part in key.split("."):
        value = value[part]
    return value


def upstream_codes(result) -> torch.Tensor:
    """The two-stage talker's valid codec frames of one request, from its stage-0 payloads."""
    codes = torch.cat([p["codes.audio"].reshape(-1, p["codes.audio"].shape[-1]) for p in result.upstream_payloads])
    return codes[(codes >= 0).all(dim=1)]
