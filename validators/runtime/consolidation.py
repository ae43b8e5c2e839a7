"""Offline output of a request: the engine's per-step accumulation + consolidation at finish, per release.

``OmniRequestState.add_multimodal_tensor(payload, mm_type)`` runs once per step and
``_consolidate_multimodal_tensors()`` once when the request finishes; what an offline consumer
(``engine.generate()``) reads as ``multimodal_output`` is the result. The behaviour changed several
times (docs/validators.md has the table):

=====  ============================================================================================
era    behaviour for a final audio stage (``mm_type="audio"``)
=====  ============================================================================================
0.14   0.14-0.16: ``audio`` is *skipped* (stays a list of chunks); other tensor lists ``cat(dim=0)``,
       falling back to keeping the last tensor (so a 0-d ``sr`` keeps the last value)
0.18   as 0.14, plus ``sr`` keeps the last value explicitly
0.20   0.20-0.22: ``audio`` ``cat(dim=-1)``, falling back to flatten-and-cat; ``sr`` keeps last;
       others ``cat(dim=0)``; DELTA requests skip drainable keys; dotted keys are unflattened
0.24   payload split into tensors / metadata; every tensor key uses the modality strategy
       (audio -> CONCAT_LAST), a failing non-audio key keeps its last tensor
0.26   0.26-0.28: ``sr``/``sample_rate``/``audio_sample_rate`` moved to metadata first; per-chunk
       metadata keys are replaced, not accumulated
0.30   strategy per key; only CONCAT_LAST failures fall back, others raise (and stop consolidation)
=====  ============================================================================================

:class:`EraAccumulator` re-implements each era (our code, written from the behaviour above);
``tests/runtime/test_consolidation_vs_release.py`` runs it against the real methods compiled out of
every release tree. :func:`real_state_factory` returns the installed release's own class when
``vllm_omni`` is importable (the real-vLLM tier) and the versions match.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable
from typing import Any

import torch

from omnitts.knowledge.runner import CONSOLIDATION_ERAS, consolidation_era, consolidation_for

log = logging.getLogger(__name__)

ERAS = CONSOLIDATION_ERAS
_META_TENSOR_KEYS = ("sr", "sample_rate", "audio_sample_rate")
_CHUNK_META_KEYS = frozenset(
    {
        "audio_text_total_chars",
        "duplex_epoch",
        "duplex_turn_id",
        "llm_output_text_utf8",
        "segment_end",
        "tts_is_last_chunk",
        "turn_end",
    }
)
_DRAINABLE = ("image", "audio")
_ALIASES = {
    "speech": "audio",
    "wav": "audio",
    "waveform": "audio",
    "images": "image",
    "pixel_values": "image",
    "pixels": "image",
    "latents": "latent",
}


def _cpu(x: Any, nested: bool = False) -> Any:
    if isinstance(x, torch.Tensor):
        if x.device.type == "cpu" and not x.requires_grad and x.is_contiguous():
            return x  # what detach().to("cpu").contiguous() aliases anyway
        return x.detach().to("cpu").contiguous()
    if nested and isinstance(x, dict):
        return {str(k): _cpu(v, nested) for k, v in x.items()}
    return x


def _is_tensor_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and isinstance(v[0], torch.Tensor)


def _unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if "." not in key:
            out[key] = value
            continue
        head, tail = key.split(".", 1)
        sub = out.setdefault(head, {})
        if head == "hidden_states" and tail.startswith("layer_"):
            sub.setdefault("layers", {})[int(tail[len("layer_") :])] = value
        else:
            sub[tail] = value
    return out


def _merge_into(store: dict[str, Any], incoming: dict[str, Any], nested_dicts: bool) -> None:
    """List-accumulate tensors; replace everything else (one level of nested dicts when asked)."""
    for k, v in incoming.items():
        if k not in store:
            store[k] = v
            continue
        old = store[k]
        if isinstance(v, torch.Tensor) and isinstance(old, torch.Tensor):
            store[k] = [old, v]
        elif isinstance(v, torch.Tensor) and isinstance(old, list):
            old.append(v)
        elif nested_dicts and isinstance(v, dict) and isinstance(old, dict):
            _merge_into(old, v, nested_dicts=False)
        else:
            store[k] = v


def _remap(payload: dict[str, Any], target: str) -> list[tuple[str, Any]]:
    out = []
    for k, v in payload.items():
        if k == "model_outputs" or (k == "hidden" and target != "hidden"):
            k = target
        out.append((k, v))
    return out


class EraAccumulator:
    """One request's accumulated multimodal output under era ``era`` (a faithful re-implementation)."""

    def __init__(self, era: str, output_kind: str = "final_only"):
        if era not in ERAS:
            raise ValueError(f"unknown consolidation era {era!r}; known: {ERAS}")
        self.era = era
        self.rules = consolidation_for(era)  # what this era does (omnitts.knowledge.runner)
        self.output_kind = output_kind
        self.mm_type: str | None = None
        # eras <= 0.20 keep one flat dict; 0.24+ split tensors / metadata
        self.flat: dict[str, Any] | None = None
        self.tensors: dict[str, Any] = {}
        self.metadata: dict[str, Any] = {}

    # -- per step ---------------------------------------------------------------------------------
    def add(self, payload: Any, mm_type: str | None) -> None:
        if payload is None:
            return
        if not self.rules.split_store:
            self._add_flat(payload, mm_type)
        else:
            self._add_split(payload, mm_type)

    def _add_flat(self, payload: Any, mm_type: str | None) -> None:
        if self.rules.mm_type_each_step:
            target = (mm_type or "").lower() or "hidden"
        else:
            if mm_type:
                self.mm_type = mm_type.lower()
            target = self.mm_type or "hidden"
        if isinstance(payload, dict):
            incoming = {}
            for k, v in _remap(payload, target):
                if self.rules.copies_nested_dicts and isinstance(v, dict):
                    incoming[k] = {str(sk): _cpu(sv) for sk, sv in v.items()}
                else:
                    incoming[k] = _cpu(v)
        else:
            incoming = {target: _cpu(payload)}
        if not self.flat:
            self.flat = incoming
        else:
            _merge_into(self.flat, incoming, nested_dicts=True)

    def _add_split(self, payload: Any, mm_type: str | None) -> None:
        if mm_type:
            self.mm_type = mm_type.lower()
        target = self.mm_type or "hidden"
        if isinstance(payload, dict):
            data = {k: _cpu(v, nested=True) for k, v in _remap(payload, target)}
        else:
            data = {target: _cpu(payload, nested=True)}
        if not data:
            return
        tensors = {k: v for k, v in data.items() if isinstance(v, torch.Tensor)}
        metadata = {k: v for k, v in data.items() if not isinstance(v, torch.Tensor)}
        if self.rules.chunk_meta_replaced:
            for key in data:
                bare = key.split(".", 1)[1] if key.startswith("meta.") else key
                if bare in _CHUNK_META_KEYS:
                    self.tensors.pop(key, None)
                    self.metadata.pop(key, None)
        if not self.tensors and not self.metadata:
            self.tensors, self.metadata = tensors, metadata
            return
        snapshots = {k: data[k] for k in _META_TENSOR_KEYS if k in data} if self.rules.sample_rate_snapshots else {}
        if self.rules.tensors_only_accumulate:
            for k, v in tensors.items():
                old = self.tensors.get(k)
                if k not in self.tensors:
                    self.tensors[k] = v
                elif isinstance(old, list):
                    old.append(v)
                elif isinstance(old, torch.Tensor):
                    self.tensors[k] = [old, v]
                else:
                    self.tensors[k] = v
            _merge_into(self.metadata, metadata, nested_dicts=False)
        else:
            for store, inc in ((self.tensors, tensors), (self.metadata, metadata)):
                for k, v in inc.items():
                    old = store.get(k)
                    if isinstance(old, list) and isinstance(v, torch.Tensor):
                        old.append(v)
                    elif isinstance(old, torch.Tensor) and isinstance(v, torch.Tensor):
                        store[k] = [old, v]
                    else:
                        store[k] = v
        for k, v in snapshots.items():
            self.tensors.pop(k, None)
            self.metadata[k] = v

    # -- at finish --------------------------------------------------------------------------------
    def consolidate(self) -> dict[str, Any]:
        if not self.rules.split_store:
            return self._consolidate_flat()
        return self._consolidate_split()

    def _consolidate_flat(self) -> dict[str, Any]:
        acc = self.flat or {}
        skip = self.rules.delta_skips_drainable and self.output_kind == "delta"
        for k, v in list(acc.items()):
            if skip and k in _DRAINABLE:
                continue
            if _is_tensor_list(v):
                if k == "audio" and self.rules.audio_stays_chunks:
                    continue
                try:
                    if k == "audio":
                        try:
                            acc[k] = torch.cat(v, dim=-1)
                        except RuntimeError:
                            acc[k] = torch.cat([t.reshape(-1) for t in v], dim=0)
                    elif k == "sr" and self.rules.sr_keeps_last:
                        acc[k] = v[-1]
                    else:
                        acc[k] = torch.cat(v, dim=0)
                except Exception:
                    acc[k] = v[-1]
            elif isinstance(v, dict):
                for sk, sv in v.items():
                    if _is_tensor_list(sv):
                        try:
                            v[sk] = torch.cat(sv, dim=0)
                        except Exception:
                            v[sk] = sv[-1]
        self.flat = acc
        return _unflatten(acc) if self.rules.unflattens_dotted_keys else dict(acc)

    def _strategy(self) -> str:
        """``OutputModality.from_string`` + ``get_accumulation_strategy`` (no per-key overrides)."""
        text = (self.mm_type or "").strip()
        if not text:
            return "dim0"
        parts = [_ALIASES.get(p.strip().lower(), p.strip().lower()) for p in re.split(r"[+,]", text)]
        if any(p not in ("text", "image", "audio", "latent") for p in parts):
            return "dim0"  # unknown modality -> TEXT -> CONCAT_DIM0
        return "last" if "audio" in parts else "dim0"

    def _consolidate_split(self) -> dict[str, Any]:
        if not self.tensors and not self.metadata:
            return {}
        strategy = self._strategy()
        try:
            if self.rules.sample_rate_to_metadata:
                for k in _META_TENSOR_KEYS:
                    v = self.tensors.pop(k, None)
                    if v is not None:
                        self.metadata[k] = v[-1] if isinstance(v, list) else v
            for k, v in list(self.tensors.items()):
                if not _is_tensor_list(v):
                    continue
                try:
                    self.tensors[k] = torch.cat(v, dim=-1) if strategy == "last" else torch.cat(v, dim=0)
                except RuntimeError as exc:
                    if self.rules.strict_strategy:
                        if strategy != "last":
                            raise RuntimeError(f"cannot concatenate {k!r}: {exc}") from exc
                        self.tensors[k] = torch.cat([t.reshape(-1) for t in v], dim=0)
                    elif k == "audio":
                        try:
                            self.tensors[k] = torch.cat(v, dim=-1)
                        except RuntimeError:
                            self.tensors[k] = torch.cat([t.reshape(-1) for t in v], dim=0)
                    else:
                        self.tensors[k] = v[-1]
            for k, v in list(self.metadata.items()):
                if _is_tensor_list(v):
                    self.metadata[k] = v[-1]
                elif isinstance(v, dict):
                    for sk, sv in list(v.items()):
                        if _is_tensor_list(sv):
                            v[sk] = sv[-1]
        except (RuntimeError, TypeError, KeyError) as exc:
            log.warning("consolidation (era %s) stopped: %s", self.era, exc)
        out = dict(self.tensors)
        out.update(self.metadata)
        return out


# ------------------------------------------------------------------------------------------------
# The release's own class (real-vLLM tier, or compiled out of a release tree by the tests)
# ------------------------------------------------------------------------------------------------


class RealStateAdapter:
    """Drives a real ``OmniRequestState`` class without running its vLLM ``__init__``."""

    def __init__(self, state_cls: type, era: str, payload_cls: type | None = None, output_kind: Any = None):
        self.state = state_cls.__new__(state_cls)
        self.era = era
        rules = consolidation_for(era)
        if rules.accumulator_starts_empty:
            self.state.mm_accumulated = None
        elif not rules.split_store:
            self.state.mm_accumulated = {}
        else:
            if payload_cls is None:
                raise ValueError(f"era {era} needs the release's MultimodalPayload class")
            self.state.mm_accumulated = payload_cls()
        self.state.mm_type = None
        self.state.output_kind = output_kind

    def add(self, payload: Any, mm_type: str | None) -> None:
        self.state.add_multimodal_tensor(payload, mm_type)

    def consolidate(self) -> dict[str, Any]:
        self.state._consolidate_multimodal_tensors()
        acc = self.state.mm_accumulated
        if acc is None:
            return {}
        if hasattr(acc, "to_dict"):
            return acc.to_dict()
        return dict(acc)


def real_state_factory(target_version: str) -> tuple[Callable[[], Any] | None, str]:
    """(factory, note): a factory of adapters over the installed release's class, or None and why."""
    try:
        import vllm_omni  # noqa: F401
        from vllm.sampling_params import RequestOutputKind
    except Exception as exc:  # noqa: BLE001 - any import failure means "not the real tier"
        return None, f"vllm_omni not importable ({type(exc).__name__}: {exc})"
    installed = getattr(vllm_omni, "__version__", None)
    if installed is None:
        try:
            from vllm_omni._version import __version__ as installed  # type: ignore[no-redef]
        except Exception:  # noqa: BLE001
            installed = None
    era = consolidation_era(target_version)
    if installed and consolidation_era(installed) != era:
        return None, f"installed vllm_omni {installed} is not of the target's era {era} ({target_version})"
    rules = consolidation_for(era)
    try:
        OmniRequestState = importlib.import_module(rules.state_module).OmniRequestState  # noqa: N806
        MultimodalPayload = (  # noqa: N806
            importlib.import_module(rules.payload_module).MultimodalPayload if rules.payload_module else None
        )
    except Exception as exc:  # noqa: BLE001
        return None, f"cannot import the release's output processor ({type(exc).__name__}: {exc})"

    def factory() -> RealStateAdapter:
        return RealStateAdapter(OmniRequestState, era, MultimodalPayload, RequestOutputKind.FINAL_ONLY)

    return factory, f"real {rules.state_module}.OmniRequestState (vllm_omni {installed or '?'})"


def offline_output(step_payloads: list[Any], version: str, mm_type: str = "audio", factory=None) -> dict[str, Any]:
    """Run one request's per-step payloads through accumulation + consolidation."""
    acc = factory() if factory is not None else EraAccumulator(consolidation_era(version))
    for payload in step_payloads:
        acc.add(payload, mm_type)
    return acc.consolidate()
