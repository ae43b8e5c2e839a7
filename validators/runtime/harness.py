"""The runner harness: steps a model through the forward contract of its target vLLM-Omni release.

It reproduces, at the model boundary, what the release's GPU runners do (0.20.0 file references):

* AR stage (``worker/gpu_ar_model_runner.py`` + ``worker/gpu_model_runner.py``): a persistent batch whose
  order changes as requests finish (holes are filled from the end, like vLLM's ``InputBatch.condense``);
  at the start of a step the finished/aborted ids of the previous step are dropped from the runner's
  ``model_intermediate_buffer`` and passed to ``model.on_requests_finished`` (0.20+); for
  ``has_preprocess`` models each request's dict gets the scheduler id under the release's key
  (``request_id``; ``req_id`` for MRv2) before ``preprocess(input_ids=..., input_embeds=..., **info)``;
  ``forward()`` receives the per-request dict list under ``runtime_additional_information`` (and
  ``model_intermediate_buffer`` from 0.18), plus ``sampling_metadata``/``logits_index``/``sampler``;
  a non-``OmniOutput`` result goes through ``make_omni_output``; an ``OmniOutput`` only counts as
  multimodal when the model sets ``have_multimodal_outputs``; ``compute_logits`` is sampled greedily and
  the EOS id (or ``max_tokens``) finishes a request; ``postprocess`` runs per request when
  ``has_postprocess``; each request's payload is cut out of the batch output the way
  ``utils/mm_outputs.to_payload_element`` does (token-aligned tensors sliced, lists indexed, other
  tensors shared).
* stage input processor (``distributed/.../chunk_transfer_adapter.py``): the talker's per-request payload
  (unflattened) goes to ``talker2code2wav_async_chunk(transfer_manager, pooling_output, request,
  is_finished)``; a returned chunk becomes the decoder request's new ``prompt_token_ids`` and its other
  keys (``meta`` without ``finished``) its ``additional_information``.
* generation stage (``worker/gpu_generation_model_runner.py``): requests with a ready chunk are batched,
  ``forward`` gets ``seq_token_counts``; chunk infos after the first reach the model only if it has a
  ``has_preprocess`` or ``enable_update_additional_information`` attribute; output lists must hold one
  entry per request; ``on_requests_finished`` is called from 0.24.
* output processor: every final-stage payload crosses a process boundary (cloned to CPU), is streamed
  as a delta and accumulated, and the request's offline output is the release's consolidation
  (:mod:`omnitts.validators.runtime.consolidation`).
"""

from __future__ import annotations

import copy
import hashlib
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from omnitts.knowledge.runner import RunnerContract as ReleaseProfile
from omnitts.knowledge.runner import consolidation_era
from omnitts.knowledge.runner import contract_for as profile_for
from omnitts.validators.runtime import timeouts
from omnitts.validators.runtime.consolidation import EraAccumulator
from omnitts.validators.runtime.subject import RequestPlan, RuntimeSubject, StageSpec

_NESTED = frozenset({"hidden_states", "embed", "ids", "codes", "meta"})


class ModelError(Exception):
    """The model raised inside one of its contract methods; carries the model's own traceback."""

    def __init__(self, where: str, exc: BaseException):
        self.where = where
        self.original = exc
        self.tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        super().__init__(f"{where} raised {type(exc).__name__}: {exc}")


class StopRun(Exception):
    """Raised by an intercept to end a run early (e.g. after torch._dynamo.explain ran one step)."""


_PASS = object()  # an intercept returns this to let the call through


class ContractError(AssertionError):
    """The model broke the forward contract in a way the release's runner would reject or mishandle."""


# ------------------------------------------------------------------------------------------------
# results
# ------------------------------------------------------------------------------------------------


@dataclass
class RequestResult:
    ext_id: str
    stage_ids: dict[int, str] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=list)
    deltas: list[torch.Tensor] = field(default_factory=list)
    delta_steps: list[int] = field(default_factory=list)
    payloads: list[dict] = field(default_factory=list)
    sr_values: list[Any] = field(default_factory=list)
    offline: dict | None = None
    t_arrive: float = 0.0
    t_first_audio: float | None = None
    t_finish: float | None = None
    finished: bool = False
    aborted: bool = False
    eos: int | None = None

    @property
    def frames(self) -> int:
        """Codec frames generated: stage-0 tokens that are not the stop token."""
        return sum(1 for t in self.tokens if t != self.eos)

    @property
    def frames_emitted(self) -> int | None:
        """Codec/latent frames in the audio stage's payloads (``codes.audio`` / ``latent`` rows), if it emits them."""
        total = None
        for flat in self.payloads:
            n = count_frames(flat)
            if n is not None:
                total = (total or 0) + n
        return total

    @property
    def stream_audio(self) -> torch.Tensor:
        if not self.deltas:
            return torch.zeros(0)
        return torch.cat([d.reshape(-1).float() for d in self.deltas])

    @property
    def sample_rate(self) -> int | None:
        for v in reversed(self.sr_values):
            try:
                return int(torch.as_tensor(v).reshape(-1)[-1])
            except Exception:  # noqa: BLE001
                continue
        return None


@dataclass
class StepRecord:
    stage: int
    step: int
    req_ids: list[str]
    num_tokens: int
    steady: bool
    seconds: float


@dataclass
class RunResult:
    subject: str
    scenario: str
    requests: dict[str, RequestResult]
    steps: list[StepRecord]
    wall: float
    consolidation: str
    models: list[Any]
    profile: ReleaseProfile
    calls: list | None = None
    alias_violations: list[str] = field(default_factory=list)

    def audio(self, ext_id: str) -> torch.Tensor:
        return self.requests[ext_id].stream_audio


# ------------------------------------------------------------------------------------------------
# helpers that mirror the release's payload handling
# ------------------------------------------------------------------------------------------------


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


def _to_host(x: Any, fresh: dict[int, torch.Tensor] | None = None) -> Any:
    """What crosses the worker -> engine process boundary: fresh CPU copies. ``fresh`` holds the tensors the step
    already copied privately (host copies of device outputs, cloned list items): those are not copied twice."""
    if isinstance(x, torch.Tensor):
        if fresh is not None and fresh.get(id(x)) is x:
            return x
        if x.device.type == "cpu":
            return x.detach().clone(memory_format=torch.contiguous_format)
        return x.detach().to("cpu").contiguous()
    if isinstance(x, dict):
        return {k: _to_host(v, fresh) for k, v in x.items()}
    if isinstance(x, list):
        return [_to_host(v, fresh) for v in x]
    return x


def _d2h(t: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """One device->host copy (none for host tensors). ``non_blocking`` queues it into pinned memory: it is readable
    after the step's single stream sync (:func:`_sync`), as the runner waits once per step, not once per tensor."""
    t = t.detach()
    if t.device.type == "cpu":
        return t
    if non_blocking:
        return t.contiguous().to("cpu", non_blocking=True)  # contiguous on the device: no host pass before the sync
    return t.to("cpu")


def _h2d(data: list, device: str) -> torch.Tensor:
    """A long tensor on ``device``; on CUDA staged through pinned memory so the copy does not wait for the GPU (a
    copy from pageable memory synchronises the stream first)."""
    host = torch.tensor(data, dtype=torch.long)
    if device == "cpu":
        return host
    if str(device).startswith("cuda"):
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)


def _sync(device: str) -> None:
    """The step's one host sync: every copy queued with ``non_blocking`` is readable after it."""
    if str(device).startswith("cuda"):
        torch.cuda.current_stream(torch.device(device)).synchronize()


def _batch_to_host(x: Any, non_blocking: bool = False) -> Any:
    """``utils/mm_outputs.build_mm_cpu`` for one value (no copy for tensors already on the host)."""
    if isinstance(x, torch.Tensor):
        return _d2h(x, non_blocking)
    if isinstance(x, dict):
        return {str(k): _d2h(v, non_blocking) for k, v in x.items() if isinstance(v, torch.Tensor)}
    if isinstance(x, list):
        return [_d2h(v, non_blocking) if isinstance(v, torch.Tensor) else v for v in x]
    return x


def _mark_fresh(fresh: dict[int, torch.Tensor], x: Any) -> Any:
    """Record the tensors in ``x`` as private host copies of this step (see :func:`_to_host`); returns ``x``."""
    if isinstance(x, torch.Tensor):
        fresh[id(x)] = x
    elif isinstance(x, dict):
        for v in x.values():
            _mark_fresh(fresh, v)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _mark_fresh(fresh, v)
    return x


def _payload_element(element: Any, idx: int, start: int, end: int, seq_len: int | None) -> Any:
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


def _leaves(x: Any, prefix: str):
    if isinstance(x, torch.Tensor):
        yield prefix or "<tensor>", x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield from _leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from _leaves(v, f"{prefix}[{i}]")


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


def _is_omni_output(x: Any) -> bool:
    return hasattr(x, "multimodal_outputs") and hasattr(x, "text_hidden_states")


def _extract(model: Any, out: Any) -> tuple[Any, dict]:
    """``OmniGPUModelRunner.extract_multimodal_outputs`` (0.20.0 gpu_model_runner.py)."""
    if getattr(model, "have_multimodal_outputs", False) and _is_omni_output(out):
        return out.text_hidden_states, (out.multimodal_outputs or {})
    if isinstance(out, torch.Tensor):
        return out, {}
    if isinstance(out, (list, tuple)):
        return out[0], {}
    raise ContractError(f"forward() returned {type(out).__name__}; the runner accepts OmniOutput, Tensor or list")


def _sched_id(ext_id: str, stage: int, salt: str) -> str:
    h = hashlib.sha1(f"{ext_id}/{stage}/{salt}".encode()).hexdigest()[:8]
    return f"{ext_id}-{h}"


class _Req:
    __slots__ = ("rid", "ext", "prompt", "out", "computed", "max_tokens", "finished", "aborted", "info", "n_chunks")

    def __init__(self, rid, ext, prompt, max_tokens, info):
        self.rid, self.ext, self.prompt, self.max_tokens = rid, ext, list(prompt), max_tokens
        self.out: list[int] = []
        self.computed = 0
        self.finished = False
        self.aborted = False
        self.info = info
        self.n_chunks = 0

    def is_finished(self) -> bool:
        return self.finished


class _Slots:
    """vLLM's persistent batch: removed slots are reused by new requests, then holes are filled from the end."""

    def __init__(self):
        self.slots: list[str | None] = []

    def remove(self, rid: str) -> None:
        for i, r in enumerate(self.slots):
            if r == rid:
                self.slots[i] = None

    def add(self, rid: str) -> None:
        for i, r in enumerate(self.slots):
            if r is None:
                self.slots[i] = rid
                return
        self.slots.append(rid)

    def condense(self) -> None:
        while self.slots and self.slots[-1] is None:
            self.slots.pop()
        while None in self.slots:
            hole = self.slots.index(None)
            self.slots[hole] = self.slots.pop()
            while self.slots and self.slots[-1] is None:
                self.slots.pop()

    def order(self) -> list[str]:
        return [r for r in self.slots if r is not None]


# ------------------------------------------------------------------------------------------------
# stages
# ------------------------------------------------------------------------------------------------


class _Stage:
    def __init__(self, engine: Engine, idx: int, spec: StageSpec, model: Any):
        self.engine, self.idx, self.spec, self.model = engine, idx, spec, model
        self.requests: dict[str, _Req] = {}
        self.buffer: dict[str, dict] = {}
        self.slots = _Slots()
        self.arrivals: list[str] = []
        self.pending_finished: set[str] = set()
        self.notified: list[set[str]] = []
        self.max_num_seqs: int | None = None
        self._kept: list = []
        self.steady_step = False  # every scheduled request is decoding (set by step())

    def _call(self, method: str, *args, **kwargs):
        fn = getattr(self.model, method) if method != "__call__" else self.model
        eng = self.engine
        if eng.recorder is not None:
            eng.recorder.append((self.idx, method, copy.deepcopy(args), copy.deepcopy(kwargs)))
        timeouts.check()  # a passed deadline stops the run cleanly between model calls
        try:
            if eng.intercept is not None:
                hit = eng.intercept(self.idx, method, fn, args, kwargs)
                if hit is not _PASS:
                    return hit
            timed = eng.timed_calls is not None and (self.idx, method) in eng.timed_calls and self.steady_step
            if timed and eng.cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            try:
                if eng.spy is not None and eng.spy_active:
                    with eng.spy.armed(eng.step_label):
                        return fn(*args, **kwargs)
                return fn(*args, **kwargs)
            finally:
                if timed and eng.cuda:
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                eng.model_seconds += dt
                if timed:
                    eng.call_seconds[(self.idx, method)] = eng.call_seconds.get((self.idx, method), 0.0) + dt
        except (ModelError, ContractError, StopRun):
            raise
        except Exception as exc:  # noqa: BLE001 - any model exception becomes a check failure with its traceback
            where = f"stage {self.idx} ({type(self.model).__name__}).{'forward' if method == '__call__' else method}"
            raise ModelError(where, exc) from exc

    def _alias_check(self, mm: Any) -> None:
        """Outputs of the previous step must not change when this step runs (no views of persistent buffers)."""
        eng = self.engine
        for name, ref, snap, step in self._kept:
            if ref.shape != snap.shape or not torch.equal(ref, snap):
                eng.alias_violations.append(
                    f"stage {self.idx} output {name} of step {step} changed in place during step {eng.step_index}"
                    " (it is a view of a persistent buffer: return a copy)"
                )
        self._kept = [(n, t, t.detach().clone(), eng.step_index) for n, t in _leaves(mm, "")]

    def finish(self, rid: str, aborted: bool = False) -> None:
        req = self.requests.get(rid)
        if req is None or rid in self.pending_finished:
            return
        req.finished = True
        req.aborted = req.aborted or aborted
        self.pending_finished.add(rid)

    def _begin_step(self, notify: bool) -> None:
        finished = self.pending_finished
        self.pending_finished = set()
        for rid in finished:
            self.requests.pop(rid, None)
            self.buffer.pop(rid, None)
            self.slots.remove(rid)
        if finished:
            self.notified.append(set(finished))
            if notify and hasattr(self.model, "on_requests_finished"):
                self._call("on_requests_finished", set(finished))
        # AR requests hold their seat until they finish; decoder requests waiting for their next chunk do not
        # (they leave the running queue), so for the generation stage max_num_seqs only bounds each step's batch
        if self.arrivals:
            limit = self.max_num_seqs if isinstance(self, ARStage) else None
            running = len(self.slots.order())
            waiting = []
            for rid in self.arrivals:
                if rid not in self.requests:
                    continue
                if limit is not None and running >= limit:
                    waiting.append(rid)  # the scheduler admits at most max_num_seqs running requests
                else:
                    self.slots.add(rid)
                    running += 1
            self.arrivals = waiting
        if finished or None in self.slots.slots:
            self.slots.condense()

    def idle(self) -> bool:
        return not self.requests and not self.pending_finished and not self.arrivals


class ARStage(_Stage):
    def add(self, rid: str, ext: str, prompt: list[int], info: dict, max_tokens: int) -> None:
        self.requests[rid] = _Req(rid, ext, prompt, max_tokens, info)
        if info:
            self.buffer[rid] = info
        self.arrivals.append(rid)

    def step(self) -> list[tuple[str, dict, bool]]:
        eng, prof, model = self.engine, self.engine.profile, self.model
        self._begin_step(prof.ar_notifies_finish)
        requests = self.requests
        batch = [r for r in self.slots.order() if not requests[r].finished]
        if not batch:
            return []
        dev = eng.device
        ids: list[int] = []
        pos: list[int] = []
        spans, lens, logits_idx = [], [], []
        steady = True
        start = 0
        for rid in batch:
            req = requests[rid]
            toks = req.prompt if req.computed == 0 else [req.out[-1]]
            n = len(toks)
            steady = steady and req.computed > 0
            ids.extend(toks)
            pos.extend(range(req.computed, req.computed + n))
            spans.append((start, start + n))
            lens.append(n)
            start += n
            logits_idx.append(start - 1)
        self.steady_step = steady
        n_tok = len(ids)
        flat = _h2d(ids + pos + logits_idx, dev)  # one host->device copy per step, then views
        input_ids, positions, logits_index = flat[:n_tok], flat[n_tok : 2 * n_tok], flat[2 * n_tok :]
        inputs_embeds = None
        t0 = time.perf_counter()
        if getattr(model, "has_preprocess", False):
            id_slices = input_ids.split(lens)
            pieces = []
            for i, rid in enumerate(batch):
                req = requests[rid]
                infos = self.buffer.get(rid, {})
                if prof.preprocess_id_key:
                    infos[prof.preprocess_id_key] = rid
                if prof.writes_omni_progress_keys:
                    infos["_omni_prompt_len"] = len(req.prompt)
                    infos["_omni_num_computed_tokens"] = req.computed
                    infos["_omni_is_prefill"] = req.computed < len(req.prompt)
                if prof.writes_omni_sampling_keys:
                    infos["_omni_max_tokens"] = req.max_tokens
                    infos["_omni_seed"] = None
                s, e = spans[i]
                ids_slice = id_slices[i]
                # like the runner: after the first request the (uninitialised) embeddings buffer exists and later
                # requests get their slice of it
                emb = inputs_embeds[s:e] if inputs_embeds is not None else None
                res = self._call("preprocess", input_ids=ids_slice, input_embeds=emb, **infos)
                if not (isinstance(res, tuple) and len(res) == 3):
                    raise ContractError("preprocess() must return (input_ids, input_embeds, update_dict)")
                r_ids, r_emb, upd = res
                if inputs_embeds is None:
                    inputs_embeds = torch.empty((start, r_emb.shape[-1]), device=r_emb.device, dtype=r_emb.dtype)
                if upd:
                    self._update_buffer(rid, upd)
                pieces.append(r_emb)
                if isinstance(r_ids, torch.Tensor) and r_ids is not ids_slice and r_ids.numel() == e - s:
                    input_ids[s:e] = r_ids
            # the runner copies each request's embeddings into its rows of that buffer (rows a request left
            # unfilled stay uninitialised); when every request filled its rows that is one concatenation
            if all(p.shape[0] == n for p, n in zip(pieces, lens, strict=True)):
                inputs_embeds = torch.cat(pieces) if len(pieces) > 1 else pieces[0]
            else:
                for (s, e), r_emb in zip(spans, pieces, strict=True):
                    n = min(e - s, r_emb.shape[0])
                    inputs_embeds[s : s + n] = r_emb[:n]
        infos_list = []
        for rid in batch:
            info = self.buffer.get(rid, {})
            if info:
                info["generated_len"] = len(requests[rid].out)
                infos_list.append(info)
            else:
                infos_list.append({})
        kwargs: dict[str, Any] = dict(
            input_ids=input_ids,
            positions=positions,
            intermediate_tensors=None,
            inputs_embeds=inputs_embeds,
            sampling_metadata=None,
            logits_index=logits_index,
            sampler=None,
        )
        for name in prof.buffer_kwargs:
            kwargs[name] = infos_list
        out = self._call("__call__", **kwargs)
        if not _is_omni_output(out) and hasattr(model, "make_omni_output"):
            out = self._call("make_omni_output", out, **kwargs)
        hidden, mm = _extract(model, out)
        if eng.check_aliasing:
            self._alias_check(mm)
        li = logits_index if logits_index.device == hidden.device else logits_index.to(hidden.device)
        logits = self._call("compute_logits", hidden[li])
        eng.step_seconds += time.perf_counter() - t0
        sampled_t = logits.argmax(dim=-1)
        hidden_slices = hidden.split(lens) if isinstance(hidden, torch.Tensor) and hidden.shape[0] == start else None
        if getattr(model, "has_postprocess", False):
            for i, rid in enumerate(batch):
                s, e = spans[i]
                req_infos = self.buffer.get(rid, {})
                kw = {k: v for k, v in req_infos.items() if k != "hidden_states"}
                h = hidden_slices[i] if hidden_slices is not None else hidden[s:e]
                self._update_buffer(rid, self._call("postprocess", h, multimodal_outputs=mm, **kw))
        eng.steps.append(StepRecord(self.idx, eng.step_index, list(batch), start, steady, time.perf_counter() - t0))
        # per-request payloads, like build_mm_cpu + to_payload_element: one device->host copy per output for the
        # whole batch, then token-aligned tensors sliced, lists indexed, other tensors shared. On CUDA every copy of
        # the step (tokens, outputs, hidden, buffer updates) is queued and the stream synchronised once.
        nb = eng.cuda
        seq_len = hidden.shape[0] if isinstance(hidden, torch.Tensor) else None
        mm_flat = flatten_payload(mm) if isinstance(mm, dict) else {}
        if nb:
            mm_flat = {k: _batch_to_host(v, non_blocking=True) for k, v in mm_flat.items()}
        h_host = _d2h(hidden, non_blocking=True) if nb and isinstance(hidden, torch.Tensor) else hidden
        if nb:
            sampled_host = _d2h(sampled_t, non_blocking=True)
            _sync(eng.device)
            sampled = sampled_host.tolist()
        else:
            sampled = sampled_t.tolist()
        host_slices: dict[str, Any] = {}
        for k, v in mm_flat.items():
            if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == seq_len and seq_len == start:
                host_slices[k] = v.split(lens)
        if isinstance(hidden, torch.Tensor):
            if h_host is hidden:
                host_slices["hidden"] = hidden_slices
            else:
                host_slices["hidden"] = h_host.split(lens) if h_host.shape[0] == start else None
        fresh = eng.fresh
        fresh.clear()
        if nb:  # host copies made above (and the views that split them) belong to the step alone
            _mark_fresh(fresh, mm_flat)
            _mark_fresh(fresh, host_slices)
        results = []
        eos = eng.subject.eos_token_id
        for i, rid in enumerate(batch):
            req = requests[rid]
            s, e = spans[i]
            req.computed += e - s
            tok = sampled[i]
            req.out.append(tok)
            done = (eos is not None and tok == eos) or len(req.out) >= req.max_tokens
            payload: dict[str, Any] = {}
            if "hidden" in host_slices:
                hs = host_slices["hidden"]
                payload["hidden"] = hs[i] if hs is not None else h_host[s:e]
            for k, v in mm_flat.items():
                sl = host_slices.get(k)
                if sl is not None:
                    payload[k] = sl[i]
                else:
                    item = payload[k] = _payload_element(v, i, s, e, seq_len)
                    if isinstance(item, torch.Tensor) and item is not v and item._base is None:
                        fresh[id(item)] = item  # a clone (list item or shared tensor), not a slice of the output
            eng.results[req.ext].tokens.append(tok)
            if done:
                self.finish(rid)
            results.append((rid, payload, done))
        return results

    def _update_buffer(self, rid: str, upd: Any) -> None:
        # host copies queued non-blocking on CUDA: step() synchronises once before the next model call reads them
        if not isinstance(upd, dict) or not upd or rid not in self.requests:
            return
        nb = self.engine.cuda
        existing = self.buffer.setdefault(rid, {})
        for k, v in upd.items():
            if isinstance(v, dict):
                sub = existing.setdefault(k, {})
                for q, val in v.items():
                    sub[q] = _d2h(val, nb).contiguous() if isinstance(val, torch.Tensor) else val
            elif isinstance(v, torch.Tensor):
                existing[k] = _d2h(v, nb).contiguous()
            elif isinstance(v, list):
                existing[k] = [_d2h(x, nb).contiguous() if isinstance(x, torch.Tensor) else x for x in v]
            else:
                existing[k] = v


class GenerationStage(_Stage):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.chunks: dict[str, list[tuple[list[int], dict, bool]]] = defaultdict(list)
        self.ready: list[str] = []  # chunk arrival order (FIFO across requests)

    def add_chunk(self, rid: str, ext: str, codes: list[int], info: dict, last: bool) -> None:
        if rid not in self.requests:
            self.requests[rid] = _Req(rid, ext, codes, 1, dict(info))
            if info:
                self.buffer[rid] = copy.copy(info)
            self.arrivals.append(rid)
        if not codes and last:
            # 0.20 OmniGenerationScheduler: "Upstream may finish with no terminal tokens; append one pad token
            # so we can emit FINISHED" - the decoder still runs one step on a single pad token
            codes = [0]
        self.chunks[rid].append((list(codes), info, last))
        self.ready.append(rid)

    def abort(self, rid: str) -> None:
        self.chunks.pop(rid, None)
        self.ready = [r for r in self.ready if r != rid]
        self.finish(rid, aborted=True)

    def step(self) -> list[tuple[str, dict, bool]]:
        eng, model = self.engine, self.model
        self._begin_step(eng.profile.generation_notifies_finish)
        results: list[tuple[str, dict | None, bool]] = []
        in_slots = set(self.slots.order())
        batch: list[str] = []
        for rid in self.ready:
            if rid in batch or rid not in in_slots or not self.chunks.get(rid) or self.requests[rid].finished:
                continue
            batch.append(rid)
            if self.max_num_seqs is not None and len(batch) >= self.max_num_seqs:
                break
        for rid in batch:
            self.ready.remove(rid)
        if not batch:
            return results
        updates_reach_model = hasattr(model, "has_preprocess") or hasattr(model, "enable_update_additional_information")
        ids, pos, counts, lasts, steady = [], [], [], [], True
        for rid in batch:
            req = self.requests[rid]
            codes, info, last = self.chunks[rid].pop(0)
            if req.n_chunks > 0 and info and updates_reach_model:
                existing = self.buffer.setdefault(rid, {})
                for k, v in info.items():
                    if isinstance(v, dict):
                        existing.setdefault(k, {}).update(v)
                    else:
                        existing[k] = v
            steady = steady and req.n_chunks > 0
            req.n_chunks += 1
            ids.extend(codes)
            pos.extend(range(len(codes)))
            counts.append(len(codes))
            lasts.append(last)
        dev = eng.device
        infos_list = [self.buffer.get(rid, {}) or {} for rid in batch]
        flat = _h2d(ids + pos, dev)  # one host->device copy per step, then views
        kwargs: dict[str, Any] = dict(
            input_ids=flat[: len(ids)],
            positions=flat[len(ids) :],
            intermediate_tensors=None,
            inputs_embeds=None,
            seq_token_counts=counts,
        )
        for name in eng.profile.buffer_kwargs:
            kwargs[name] = infos_list
        t0 = time.perf_counter()
        out = self._call("__call__", **kwargs)
        eng.step_seconds += time.perf_counter() - t0
        eng.steps.append(StepRecord(self.idx, eng.step_index, list(batch), len(ids), steady, time.perf_counter() - t0))
        _, mm = _extract(model, out)
        if eng.check_aliasing:
            self._alias_check(mm)
        n = len(batch)
        per_req: list[dict] = [{} for _ in range(n)]
        if isinstance(mm, torch.Tensor):
            if mm.shape[0] != n:
                raise ContractError(f"decoder returned one tensor of batch {mm.shape[0]} for {n} requests")
            per_req = [{"model_outputs": mm[i]} for i in range(n)]
        elif isinstance(mm, list):
            if len(mm) != n:
                raise ContractError(f"decoder returned a list of {len(mm)} outputs for {n} requests")
            per_req = [{"model_outputs": x} for x in mm]
        elif isinstance(mm, dict):
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
        eng.fresh.clear()
        if eng.cuda:
            # what crosses to the engine process, copied once per tensor with one sync per step; a copy that only
            # one request holds is private to it (not copied again), one shared by several requests is (per request)
            copied: dict[int, list] = {}  # id(device tensor) -> [host copy, number of requests holding it]

            def host(v):
                if isinstance(v, torch.Tensor):
                    entry = copied.setdefault(id(v), [None, 0])
                    if entry[0] is None:
                        entry[0] = _d2h(v, non_blocking=True)
                    entry[1] += 1
                    return entry[0]
                if isinstance(v, dict):
                    return {k: host(x) for k, x in v.items()}
                if isinstance(v, list):
                    return [host(x) for x in v]
                return v

            per_req = [host(p) for p in per_req]
            _sync(eng.device)
            _mark_fresh(eng.fresh, [host_copy for host_copy, holders in copied.values() if holders == 1])
        for i, rid in enumerate(batch):
            if lasts[i]:
                self.finish(rid)
            results.append((rid, per_req[i], lasts[i]))
        return results


# ------------------------------------------------------------------------------------------------
# the engine
# ------------------------------------------------------------------------------------------------


class _TransferManager:
    """The attributes a 0.20 ``*_async_chunk`` stage input processor reads off its transfer manager."""

    def __init__(self, extra: dict, max_num_seqs: int):
        self.code_prompt_token_ids: dict[str, list] = defaultdict(list)
        self.request_payload: dict[str, Any] = {}
        self.connector = SimpleNamespace(config={"extra": dict(extra)})
        self.scheduler_max_num_seqs = max_num_seqs


PASS = _PASS


class Engine:
    """Runs scenarios (lists of :class:`RequestPlan`) through a subject's stages."""

    def __init__(
        self,
        subject: RuntimeSubject,
        *,
        device: str = "cpu",
        profile: ReleaseProfile | None = None,
        consolidation_factory=None,
        consolidation_source: str | None = None,
        async_chunk: bool = True,
        connector_extra: dict | None = None,
        models: list | None = None,
        gen_max_batch: int | None = None,
        stage0_max_num_seqs: int | None = None,
        max_steps: int = 5000,
        check_aliasing: bool = False,
        spy=None,
        record_calls: bool = False,
        salt: str = "",
    ):
        self.subject = subject
        self.device = device
        self.profile = profile or profile_for(subject.release, subject.model_runner)
        self.era = subject.consolidation_era or consolidation_era(self.profile.version)
        self.consolidation_factory = consolidation_factory
        self.consolidation_source = consolidation_source or f"omnitts era-{self.era} re-implementation"
        self.async_chunk = async_chunk
        self.extra = {**subject.connector_extra, **(connector_extra or {})}
        self.max_steps = max_steps
        self.spy = spy
        self.spy_active = False
        self.intercept = None  # (stage, method, fn, args, kwargs) -> result or harness.PASS
        self.check_aliasing = check_aliasing
        # (stage, method) pairs timed per steady-state step, with torch.cuda.synchronize() around them on CUDA
        self.timed_calls: set[tuple[int, str]] | None = None
        self.call_seconds: dict[tuple[int, str], float] = {}
        self.cuda = str(device).startswith("cuda")
        self.alias_violations: list[str] = []
        self.fresh: dict[int, torch.Tensor] = {}  # private host copies of the current step (see _to_host)
        self.recorder: list | None = [] if record_calls else None
        self.salt = salt
        if models is None:
            models = []
            for st in subject.stages:
                m = st.factory()
                if hasattr(m, "to"):
                    m = m.to(device)
                if hasattr(m, "eval"):
                    m.eval()
                models.append(m)
        self.models = models
        self.stages: list[_Stage] = []
        for i, (st, m) in enumerate(zip(subject.stages, models, strict=True)):
            cls = ARStage if st.execution == "ar" else GenerationStage
            self.stages.append(cls(self, i, st, m))
        limits = list(subject.max_num_seqs) + [None] * len(self.stages)
        for i, st in enumerate(self.stages):
            st.max_num_seqs = limits[i]
        if gen_max_batch is not None and len(self.stages) > 1:
            self.stages[1].max_num_seqs = gen_max_batch or None  # 0 = unlimited
        if stage0_max_num_seqs is not None:
            self.stages[0].max_num_seqs = stage0_max_num_seqs or None
        self.step_index = 0
        self.step_label = ""
        self.step_seconds = 0.0
        self.model_seconds = 0.0  # wall time inside model-side calls (the rest of a run is the harness)
        self.steps: list[StepRecord] = []
        self.results: dict[str, RequestResult] = {}
        self._accs: dict[str, Any] = {}

    # -- per-request output path ------------------------------------------------------------------
    def _emit_final(self, ext: str, payload: dict, now: float) -> None:
        res = self.results[ext]
        flat = flatten_payload(payload)
        if "hidden" in flat and ("model_outputs" in flat or "audio" in flat):
            # the output processor renames "hidden" to the audio key first and "model_outputs" overwrites it
            flat = {k: v for k, v in flat.items() if k != "hidden"}
        flat = _to_host(flat, self.fresh)
        mm_type = "audio"
        delta = None
        for k in ("model_outputs", "audio"):
            if k in flat:
                delta = flat[k]
                break
        if delta is None and "hidden" in flat:
            delta = flat["hidden"]  # the output processor renames "hidden" to the modality key
        if "sr" in flat:
            res.sr_values.append(flat["sr"])
        res.payloads.append(flat)
        self._accs[ext].add(flat, mm_type)
        if isinstance(delta, torch.Tensor):
            res.deltas.append(delta)
            res.delta_steps.append(self.step_index)
            if res.t_first_audio is None and delta.numel() > 0:
                res.t_first_audio = now

    def _new_acc(self):
        if self.consolidation_factory is not None:
            return self.consolidation_factory()
        return EraAccumulator(self.era)

    # -- run --------------------------------------------------------------------------------------
    def run(self, plans: list[RequestPlan], scenario: str = "") -> RunResult:
        t_start = time.perf_counter()
        self.results = {}
        self._accs = {}
        self.steps = []
        self.step_seconds = 0.0
        self.model_seconds = 0.0
        s0 = self.stages[0]
        s1 = self.stages[1] if len(self.stages) > 1 else None
        tm = _TransferManager(self.extra, 4)
        ids: dict[str, dict[int, str]] = {}
        by_step: dict[int, list[RequestPlan]] = defaultdict(list)
        for p in plans:
            by_step[p.arrive_step].append(p)
        aborts = {p.ext_id: p.abort_step for p in plans if p.abort_step is not None}
        stage0_req_obj: dict[str, _Req] = {}
        pending = len(plans)
        open_reqs: set[str] = set()
        with torch.inference_mode():
            step = 0
            while pending or open_reqs:
                if step > self.max_steps:
                    raise ContractError(
                        f"scenario {scenario!r} did not finish after {self.max_steps} steps; "
                        f"open requests: {sorted(open_reqs)}"
                    )
                self.step_index = step
                now = time.perf_counter()
                for p in by_step.get(step, []):
                    pending -= 1
                    rid0 = _sched_id(p.ext_id, 0, self.salt)
                    ids[p.ext_id] = {0: rid0}
                    res = RequestResult(p.ext_id, stage_ids=ids[p.ext_id], eos=self.subject.eos_token_id)
                    res.t_arrive = now
                    self.results[p.ext_id] = res
                    self._accs[p.ext_id] = self._new_acc()
                    info = copy.deepcopy(p.additional_information)
                    info["global_request_id"] = [p.ext_id]
                    s0.add(rid0, p.ext_id, p.prompt_token_ids, info, p.max_tokens)
                    stage0_req_obj[p.ext_id] = s0.requests[rid0]
                    open_reqs.add(p.ext_id)
                for ext, at in aborts.items():
                    if at == step and ext in open_reqs:
                        self._abort(ext, ids, tm)
                        open_reqs.discard(ext)
                # stage 0
                self.step_label = f"stage0 step {step}"
                out0 = s0.step()
                progressed = bool(out0)
                for rid, payload, done in out0:
                    ext = s0.requests[rid].ext if rid in s0.requests else rid
                    req = stage0_req_obj[ext]
                    if s1 is None:
                        self._emit_final(ext, payload, time.perf_counter())
                        if done:
                            self._finish(ext)
                            open_reqs.discard(ext)
                    else:
                        self._transfer(ext, req, payload, done, ids, tm, s1)
                # stage 1
                if s1 is not None:
                    self.step_label = f"stage1 step {step}"
                    out1 = s1.step()
                    progressed = progressed or bool(out1)
                    for rid, payload, last in out1:
                        ext = s1.requests[rid].ext
                        if payload is not None:
                            self._emit_final(ext, payload, time.perf_counter())
                        if last:
                            self._finish(ext)
                            open_reqs.discard(ext)
                if not pending and open_reqs and not progressed:
                    s0_busy = any(not r.finished for r in s0.requests.values())
                    s1_busy = s1 is not None and any(s1.chunks.get(r) for r in s1.requests)
                    if not s0_busy and not s1_busy:
                        raise ContractError(
                            f"requests {sorted(open_reqs)} never finished: stage 0 is done but no final chunk"
                            " (meta.finished) reached the decoder; the stage input processor must emit one"
                        )
                step += 1
            # deliver the last finish notifications (the runner sees them with the next schedule)
            self.step_index = step
            self.step_label = f"drain step {step}"
            for st in self.stages:
                if st.pending_finished:
                    st.step()
        wall = time.perf_counter() - t_start
        return RunResult(
            subject=self.subject.name,
            scenario=scenario,
            requests=self.results,
            steps=self.steps,
            wall=wall,
            consolidation=self.consolidation_source,
            models=self.models,
            profile=self.profile,
            calls=self.recorder,
            alias_violations=list(self.alias_violations),
        )

    def _finish(self, ext: str) -> None:
        res = self.results[ext]
        res.finished = True
        res.t_finish = time.perf_counter()
        res.offline = self._accs[ext].consolidate()

    def _abort(self, ext: str, ids: dict, tm: _TransferManager) -> None:
        res = self.results[ext]
        res.aborted = True
        res.t_finish = time.perf_counter()
        self.stages[0].finish(ids[ext][0], aborted=True)
        if len(self.stages) > 1 and 1 in ids[ext]:
            self.stages[1].abort(ids[ext][1])
        tm.code_prompt_token_ids.pop(ext, None)
        tm.request_payload.pop(ext, None)

    def _transfer(self, ext, req: _Req, payload: dict, done: bool, ids, tm: _TransferManager, s1: GenerationStage):
        fn = self.subject.async_chunk_fn
        if fn is None:
            raise ContractError("two-stage subject without an async-chunk stage input processor")
        # the step's payload is already flat and on the host (one device->host copy per output in step()); the
        # processor gets it unflattened, as from chunk_transfer_adapter (no second copy: I5's aliasing check
        # covers outputs that change after they were returned)
        pooling_output = unflatten_payload(payload)
        request = SimpleNamespace(
            external_req_id=ext,
            request_id=req.rid,
            is_finished=req.is_finished,
            additional_information=None,
            prompt_token_ids=req.prompt,
            output_token_ids=list(req.out),
        )
        if self.recorder is not None:
            self.recorder.append(("proc", fn, copy.deepcopy((tm, pooling_output, request, done)), {}))
        t0 = time.perf_counter()
        try:
            chunk = fn(tm, pooling_output, request, done)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"stage input processor {getattr(fn, '__name__', fn)}", exc) from exc
        finally:
            self.model_seconds += time.perf_counter() - t0
        if done:
            tm.code_prompt_token_ids.pop(ext, None)
            tm.request_payload.pop(ext, None)
        if chunk is None:
            return
        if not isinstance(chunk, dict):
            raise ContractError(f"the async-chunk processor returned {type(chunk).__name__}, expected a dict or None")
        codes = (chunk.get("codes") or {}).get("audio", [])
        if isinstance(codes, torch.Tensor):
            codes = codes.reshape(-1).tolist()
        meta = chunk.get("meta") or {}
        fin = meta.get("finished", False)
        last = bool(fin.item() if isinstance(fin, torch.Tensor) else fin)
        info = {}
        for k, v in chunk.items():
            if k == "codes":
                continue
            if isinstance(v, dict):
                info[k] = {sk: sv for sk, sv in v.items() if not (k == "meta" and sk == "finished")}
            else:
                info[k] = v
        if 1 not in ids[ext]:
            ids[ext][1] = _sched_id(ext, 1, self.salt)
        if not codes and not last:
            return
        s1.add_chunk(ids[ext][1], ext, codes, info, last)


def run_scenario(subject: RuntimeSubject, plans: list[RequestPlan], scenario: str = "", **engine_kwargs) -> RunResult:
    return Engine(subject, **engine_kwargs).run(plans, scenario)
