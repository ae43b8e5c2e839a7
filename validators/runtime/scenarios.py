"""Batch compositions the checks run, and helpers shared by the check modules."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import torch

from omnitts.validators.runtime.subject import RequestPlan, RuntimeSubject


def compositions(subject: RuntimeSubject) -> dict[str, tuple[list[RequestPlan], dict]]:
    """name -> (plans, engine kwargs). At least 4 concurrent requests of different lengths in each."""
    base = [replace(p, arrive_step=0, abort_step=None) for p in subject.prompts]
    n = len(base)
    out: dict[str, tuple[list[RequestPlan], dict]] = {
        "all_at_once": (base, {}),
        "staggered": ([replace(p, arrive_step=2 * i) for i, p in enumerate(base)], {}),
        "reversed_arrival": ([replace(p, arrive_step=n - 1 - i) for i, p in enumerate(base)], {}),
    }
    if subject.two_stage:
        # the deploy config's decoder max_num_seqs (1 in the templates) is the default; also batch every ready window
        out["decoder_batched"] = (base, {"gen_max_batch": 0})
    victim = replace(base[-1], ext_id="aborted-0", arrive_step=1, abort_step=4)
    out["with_abort"] = ([replace(p, arrive_step=i) for i, p in enumerate(base)] + [victim], {})
    return out


def offline_audio(offline: dict | None) -> torch.Tensor:
    """omnitts' own consumer of ``multimodal_output``: audio key, list form handled, flattened."""
    if not offline:
        return torch.zeros(0)
    val = offline.get("audio")
    if val is None:
        val = offline.get("model_outputs")
    if val is None:
        return torch.zeros(0)
    if isinstance(val, list):
        return torch.cat([torch.as_tensor(v).reshape(-1).float() for v in val]) if val else torch.zeros(0)
    if isinstance(val, np.ndarray):
        return torch.from_numpy(val).reshape(-1).float()
    return torch.as_tensor(val).reshape(-1).float()


def declared_semantics(cls) -> tuple[str | None, str]:
    """('delta' | 'cumulative' | None, docstring) as declared by ``cls.forward``'s docstring."""
    doc = (getattr(getattr(cls, "forward", None), "__doc__", None) or "").strip()
    low = doc.lower()
    hits = [(m.start(), w) for w in ("delta", "cumulative") for m in re.finditer(rf"\b{w}\b", low)]
    if not hits:
        return None, doc
    return min(hits)[1], doc


def frames_for(subject: RuntimeSubject, result) -> int:
    """Codec frames of one request: counted from the AR stage's payloads (``codes.audio`` / ``latent`` rows),
    else its stage-0 tokens (minus the stop token unless the EOS step still emits audio)."""
    if result.frames_emitted is not None:
        return result.frames_emitted
    if subject.eos_step_emits_audio:
        return len(result.tokens)
    return result.frames


def short_plans(subject: RuntimeSubject, count: int, max_tokens: int = 4, prefix: str = "seq") -> list[RequestPlan]:
    shortest = min(subject.prompts, key=lambda p: len(p.prompt_token_ids))
    return [
        replace(shortest, ext_id=f"{prefix}-{i}", max_tokens=max_tokens, arrive_step=0, abort_step=None)
        for i in range(count)
    ]
