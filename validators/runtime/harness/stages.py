"""The two kinds of stage the release's runners step: the AR stage and the generation (decoder) stage.

AR stage (``worker/gpu_ar_model_runner.py`` + ``worker/gpu_model_runner.py``): a persistent batch whose order changes
as requests finish; finished ids go to ``on_requests_finished`` at the start of the next step (0.20+); for
``has_preprocess`` models each request's dict gets the scheduler id under the release's key before ``preprocess``;
``forward`` gets the per-request dict list; ``compute_logits`` is sampled greedily; ``postprocess`` runs per request;
each request's payload is cut out of the batch output. Generation stage (``worker/gpu_generation_model_runner.py``):
requests with a ready chunk are batched with ``seq_token_counts``; output lists hold one entry per request.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from omnitts.validators.runtime import timeouts
from omnitts.validators.runtime.harness.errors import PASS, ContractError, ModelError, StopRun
from omnitts.validators.runtime.harness.hostcopy import (
    batch_to_host,
    d2h,
    h2d,
    host_copies_per_request,
    mark_fresh,
    misplaced,
    sync,
)
from omnitts.validators.runtime.harness.payloads import (
    extract,
    flatten_payload,
    is_omni_output,
    leaves,
    payload_element,
    split_generation_output,
)
from omnitts.validators.runtime.harness.results import StepRecord
from omnitts.validators.runtime.harness.scheduling import Req, Slots

if TYPE_CHECKING:
    from omnitts.validators.runtime.harness.loop import Harness
    from omnitts.validators.runtime.subject import StageSpec


def _unchanged(now: torch.Tensor, kept: torch.Tensor) -> bool:
    """Equal element for element, NaN where NaN was (NaN != NaN: a NaN output is audio.finite's finding, not an
    overwrite)."""
    if torch.equal(now, kept):
        return True
    if not now.is_floating_point():
        return False
    return bool(((now == kept) | (now.isnan() & kept.isnan())).all())


class Stage:
    def __init__(self, harness: Harness, idx: int, spec: StageSpec, model: Any):
        self.harness, self.idx, self.spec, self.model = harness, idx, spec, model
        self.device = harness.stage_devices[idx]  # this stage's device (its model, inputs and outputs)
        self.requests: dict[str, Req] = {}
        self.buffer: dict[str, dict] = {}
        self.slots = Slots()
        self.arrivals: list[str] = []
        self.pending_finished: set[str] = set()
        self.notified: list[set[str]] = []
        self.max_num_seqs: int | None = None
        self._kept: list = []
        self.steady_step = False  # every scheduled request is decoding (set by step())

    def _call(self, method: str, *args, **kwargs):
        fn = getattr(self.model, method) if method != "__call__" else self.model
        harness = self.harness
        if harness.recorder is not None:
            harness.recorder.append((self.idx, method, copy.deepcopy(args), copy.deepcopy(kwargs)))
        timeouts.check()  # a passed deadline stops the run cleanly between model calls
        try:
            if harness.intercept is not None:
                hit = harness.intercept(self.idx, method, fn, args, kwargs)
                if hit is not PASS:
                    return hit
            timed = harness.timed_calls is not None and (self.idx, method) in harness.timed_calls and self.steady_step
            if timed and harness.cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            try:
                with harness.on_stage_device(self.idx):
                    if harness.spy is not None and harness.spy_active:
                        with harness.spy.armed(harness.step_label):
                            return fn(*args, **kwargs)
                    return fn(*args, **kwargs)
            finally:
                if timed and harness.cuda:
                    torch.cuda.synchronize()
                dt = time.perf_counter() - t0
                harness.model_seconds += dt
                if timed:
                    harness.call_seconds[(self.idx, method)] = harness.call_seconds.get((self.idx, method), 0.0) + dt
        except (ModelError, ContractError, StopRun):
            raise
        except Exception as exc:  # noqa: BLE001 - any model exception becomes a check failure with its traceback
            where = f"stage {self.idx} ({type(self.model).__name__}).{'forward' if method == '__call__' else method}"
            raise ModelError(where, exc) from exc

    def _audit_device(self, outputs: Any) -> None:
        """With the stages on different devices: outputs on another device than this stage's are findings (host
        tensors such as ``sr`` are fine), e.g. a stage computing on the other stage's GPU."""
        if self.harness.split:  # one device: nothing but the host besides it (host outputs are fine)
            where = f"stage {self.idx} ({type(self.model).__name__}, on {self.device}) step {self.harness.step_index}"
            self.harness.note_misplaced(misplaced(outputs, str(self.device), where, host_ok=True))

    def _alias_check(self, mm: Any) -> None:
        """Outputs of the previous step must not change when this step runs (no views of persistent buffers)."""
        harness = self.harness
        for name, ref, snap, step in self._kept:
            if ref.shape != snap.shape or not _unchanged(ref, snap):
                harness.alias_violations.append(
                    f"stage {self.idx} output {name} of step {step} changed in place during step {harness.step_index}"
                    " (it is a view of a persistent buffer: return a copy)"
                )
        self._kept = [(n, t, t.detach().clone(), harness.step_index) for n, t in leaves(mm, "")]

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


@dataclass
class ARBatch:
    """One AR step's flattened inputs: request ids in batch order, each one's token span, and the device tensors
    (one host->device copy per step, then views)."""

    rids: list[str]
    spans: list[tuple[int, int]]
    lens: list[int]
    num_tokens: int
    steady: bool
    input_ids: torch.Tensor
    positions: torch.Tensor
    logits_index: torch.Tensor


@dataclass
class HostOutputs:
    """What one AR step hands to the engine process: sampled tokens, the flat outputs on the host, and per output
    the per-request slices when the output is token-aligned."""

    sampled: list[int]
    mm_flat: dict[str, Any]
    hidden: Any
    slices: dict[str, Any]
    seq_len: int | None


class ARStage(Stage):
    def add(self, rid: str, ext: str, prompt: list[int], info: dict, max_tokens: int, seed: int | None = None) -> None:
        self.requests[rid] = Req(rid, ext, prompt, max_tokens, info, seed)
        if info:
            self.buffer[rid] = info
        self.arrivals.append(rid)

    def step(self) -> list[tuple[str, dict, bool]]:
        """One scheduled step: schedule, build inputs, preprocess, forward, sample, postprocess, copy out, emit."""
        harness = self.harness
        self._begin_step(harness.contract.ar_notifies_finish)
        rids = [r for r in self.slots.order() if not self.requests[r].finished]
        if not rids:
            return []
        batch = self._build_inputs(rids)
        t0 = time.perf_counter()
        inputs_embeds = self._preprocess(batch)
        hidden, mm = self._forward(batch, inputs_embeds)
        li = batch.logits_index if batch.logits_index.device == hidden.device else batch.logits_index.to(hidden.device)
        logits = self._call("compute_logits", hidden[li])
        harness.step_seconds += time.perf_counter() - t0
        sampled = logits.argmax(dim=-1)
        hidden_slices = (
            hidden.split(batch.lens)
            if isinstance(hidden, torch.Tensor) and hidden.shape[0] == batch.num_tokens
            else None
        )
        self._postprocess(batch, hidden, hidden_slices, mm)
        harness.steps.append(
            StepRecord(
                self.idx, harness.step_index, list(rids), batch.num_tokens, batch.steady, time.perf_counter() - t0
            )
        )
        host = self._copy_out(batch, hidden, hidden_slices, mm, sampled)
        return self._emit(batch, host)

    def _build_inputs(self, rids: list[str]) -> ARBatch:
        """Prefill requests contribute their prompt, decoding ones their last token; one host->device copy."""
        ids: list[int] = []
        pos: list[int] = []
        spans, lens, logits_idx = [], [], []
        steady = True
        start = 0
        for rid in rids:
            req = self.requests[rid]
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
        flat = h2d(ids + pos + logits_idx, self.device)
        return ARBatch(rids, spans, lens, start, steady, flat[:n_tok], flat[n_tok : 2 * n_tok], flat[2 * n_tok :])

    def _release_keys(self, rid: str, req: Req, infos: dict) -> None:
        """The keys the release's runner writes into a request's dict right before ``preprocess``."""
        prof = self.harness.contract
        if prof.preprocess_id_key:
            infos[prof.preprocess_id_key] = rid
        if prof.writes_omni_progress_keys:
            infos["_omni_prompt_len"] = len(req.prompt)
            infos["_omni_num_computed_tokens"] = req.computed
            infos["_omni_is_prefill"] = req.computed < len(req.prompt)
        if prof.writes_omni_sampling_keys:
            infos["_omni_max_tokens"] = req.max_tokens
            infos["_omni_seed"] = req.seed

    def _preprocess(self, batch: ARBatch) -> torch.Tensor | None:
        """``preprocess`` per request (``has_preprocess`` models): its embeddings fill the request's rows of the
        step's embeddings buffer, its update dict merges into the request's buffer entry."""
        if not getattr(self.model, "has_preprocess", False):
            return None
        inputs_embeds = None
        input_ids = batch.input_ids
        id_slices = input_ids.split(batch.lens)
        pieces = []
        for i, rid in enumerate(batch.rids):
            req = self.requests[rid]
            infos = self.buffer.get(rid, {})
            self._release_keys(rid, req, infos)
            s, e = batch.spans[i]
            ids_slice = id_slices[i]
            # like the runner: after the first request the (uninitialised) embeddings buffer exists and later
            # requests get their slice of it
            emb = inputs_embeds[s:e] if inputs_embeds is not None else None
            res = self._call("preprocess", input_ids=ids_slice, input_embeds=emb, **infos)
            if not (isinstance(res, tuple) and len(res) == 3):
                raise ContractError("preprocess() must return (input_ids, input_embeds, update_dict)")
            r_ids, r_emb, upd = res
            if inputs_embeds is None:
                inputs_embeds = torch.empty((batch.num_tokens, r_emb.shape[-1]), device=r_emb.device, dtype=r_emb.dtype)
            if upd:
                self._update_buffer(rid, upd)
            pieces.append(r_emb)
            if isinstance(r_ids, torch.Tensor) and r_ids is not ids_slice and r_ids.numel() == e - s:
                input_ids[s:e] = r_ids
        # the runner copies each request's embeddings into its rows of that buffer (rows a request left
        # unfilled stay uninitialised); when every request filled its rows that is one concatenation
        if all(p.shape[0] == n for p, n in zip(pieces, batch.lens, strict=True)):
            return torch.cat(pieces) if len(pieces) > 1 else pieces[0]
        for (s, e), r_emb in zip(batch.spans, pieces, strict=True):
            n = min(e - s, r_emb.shape[0])
            inputs_embeds[s : s + n] = r_emb[:n]
        return inputs_embeds

    def _forward(self, batch: ARBatch, inputs_embeds: torch.Tensor | None) -> tuple[Any, Any]:
        """``forward`` with the per-request dicts under the release's kwargs; ``make_omni_output`` when it did not
        return an ``OmniOutput``; returns (hidden states, multimodal outputs)."""
        infos_list = []
        for rid in batch.rids:
            info = self.buffer.get(rid, {})
            if info:
                info["generated_len"] = len(self.requests[rid].out)
                infos_list.append(info)
            else:
                infos_list.append({})
        kwargs: dict[str, Any] = dict(
            input_ids=batch.input_ids,
            positions=batch.positions,
            intermediate_tensors=None,
            inputs_embeds=inputs_embeds,
            sampling_metadata=None,
            logits_index=batch.logits_index,
            sampler=None,
        )
        for name in self.harness.contract.buffer_kwargs:
            kwargs[name] = infos_list
        out = self._call("__call__", **kwargs)
        if not is_omni_output(out) and hasattr(self.model, "make_omni_output"):
            out = self._call("make_omni_output", out, **kwargs)
        hidden, mm = extract(self.model, out)
        self._audit_device({"hidden": hidden, "multimodal_outputs": mm})
        if self.harness.check_aliasing:
            self._alias_check(mm)
        return hidden, mm

    def _postprocess(self, batch: ARBatch, hidden: Any, hidden_slices: Any, mm: Any) -> None:
        """``postprocess`` per request (``has_postprocess`` models) on its hidden rows; updates merge into its dict."""
        if not getattr(self.model, "has_postprocess", False):
            return
        for i, rid in enumerate(batch.rids):
            s, e = batch.spans[i]
            req_infos = self.buffer.get(rid, {})
            kw = {k: v for k, v in req_infos.items() if k != "hidden_states"}
            h = hidden_slices[i] if hidden_slices is not None else hidden[s:e]
            self._update_buffer(rid, self._call("postprocess", h, multimodal_outputs=mm, **kw))

    def _copy_out(self, batch: ARBatch, hidden: Any, hidden_slices: Any, mm: Any, sampled: torch.Tensor) -> HostOutputs:
        """Like build_mm_cpu + to_payload_element: one device->host copy per output for the whole batch, then
        token-aligned tensors split per request. On CUDA every copy of the step (tokens, outputs, hidden, buffer
        updates) is queued and the stream synchronised once."""
        harness = self.harness
        nb = harness.cuda
        n_tok = batch.num_tokens
        seq_len = hidden.shape[0] if isinstance(hidden, torch.Tensor) else None
        mm_flat = flatten_payload(mm) if isinstance(mm, dict) else {}
        if nb:
            mm_flat = {k: batch_to_host(v, non_blocking=True) for k, v in mm_flat.items()}
        h_host = d2h(hidden, non_blocking=True) if nb and isinstance(hidden, torch.Tensor) else hidden
        if nb:
            sampled_host = d2h(sampled, non_blocking=True)
            sync(self.device)
            tokens = sampled_host.tolist()
        else:
            tokens = sampled.tolist()
        slices: dict[str, Any] = {}
        for k, v in mm_flat.items():
            if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == seq_len and seq_len == n_tok:
                slices[k] = v.split(batch.lens)
        if isinstance(hidden, torch.Tensor):
            if h_host is hidden:
                slices["hidden"] = hidden_slices
            else:
                slices["hidden"] = h_host.split(batch.lens) if h_host.shape[0] == n_tok else None
        fresh = harness.fresh
        fresh.clear()
        if nb:  # host copies made above (and the views that split them) belong to the step alone
            mark_fresh(fresh, mm_flat)
            mark_fresh(fresh, slices)
        return HostOutputs(tokens, mm_flat, h_host, slices, seq_len)

    def _emit(self, batch: ARBatch, host: HostOutputs) -> list[tuple[str, dict, bool]]:
        """Each request's token and payload; EOS or ``max_tokens`` finishes it."""
        harness = self.harness
        fresh = harness.fresh
        eos = harness.subject.eos_token_id
        results = []
        for i, rid in enumerate(batch.rids):
            req = self.requests[rid]
            s, e = batch.spans[i]
            req.computed += e - s
            tok = host.sampled[i]
            req.out.append(tok)
            done = (eos is not None and tok == eos) or len(req.out) >= req.max_tokens
            payload: dict[str, Any] = {}
            if "hidden" in host.slices:
                hs = host.slices["hidden"]
                payload["hidden"] = hs[i] if hs is not None else host.hidden[s:e]
            for k, v in host.mm_flat.items():
                sl = host.slices.get(k)
                if sl is not None:
                    payload[k] = sl[i]
                else:
                    item = payload[k] = payload_element(v, i, s, e, host.seq_len)
                    if isinstance(item, torch.Tensor) and item is not v and item._base is None:
                        fresh[id(item)] = item  # a clone (list item or shared tensor), not a slice of the output
            harness.results[req.ext].tokens.append(tok)
            if done:
                self.finish(rid)
            results.append((rid, payload, done))
        return results

    def _update_buffer(self, rid: str, upd: Any) -> None:
        # host copies queued non-blocking on CUDA: step() synchronises once before the next model call reads them
        if not isinstance(upd, dict) or not upd or rid not in self.requests:
            return
        nb = self.harness.cuda
        existing = self.buffer.setdefault(rid, {})
        for k, v in upd.items():
            if isinstance(v, dict):
                sub = existing.setdefault(k, {})
                for q, val in v.items():
                    sub[q] = d2h(val, nb).contiguous() if isinstance(val, torch.Tensor) else val
            elif isinstance(v, torch.Tensor):
                existing[k] = d2h(v, nb).contiguous()
            elif isinstance(v, list):
                existing[k] = [d2h(x, nb).contiguous() if isinstance(x, torch.Tensor) else x for x in v]
            else:
                existing[k] = v


class GenerationStage(Stage):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.chunks: dict[str, list[tuple[list[int], dict, bool]]] = defaultdict(list)
        self.ready: list[str] = []  # chunk arrival order (FIFO across requests)

    def add_chunk(self, rid: str, ext: str, codes: list[int], info: dict, last: bool) -> None:
        if rid not in self.requests:
            self.requests[rid] = Req(rid, ext, codes, 1, dict(info))
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

    def _schedule(self) -> list[str]:
        """Requests with a ready chunk, in chunk arrival order, at most ``max_num_seqs`` of them."""
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
        return batch

    def step(self) -> list[tuple[str, dict, bool]]:
        harness, model = self.harness, self.model
        self._begin_step(harness.contract.generation_notifies_finish)
        results: list[tuple[str, dict | None, bool]] = []
        batch = self._schedule()
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
        infos_list = [self.buffer.get(rid, {}) or {} for rid in batch]
        flat = h2d(ids + pos, self.device)  # one host->device copy per step, then views
        kwargs: dict[str, Any] = dict(
            input_ids=flat[: len(ids)],
            positions=flat[len(ids) :],
            intermediate_tensors=None,
            inputs_embeds=None,
            seq_token_counts=counts,
        )
        for name in harness.contract.buffer_kwargs:
            kwargs[name] = infos_list
        t0 = time.perf_counter()
        out = self._call("__call__", **kwargs)
        harness.step_seconds += time.perf_counter() - t0
        harness.steps.append(
            StepRecord(self.idx, harness.step_index, list(batch), len(ids), steady, time.perf_counter() - t0)
        )
        _, mm = extract(model, out)
        self._audit_device({"multimodal_outputs": mm})
        if harness.check_aliasing:
            self._alias_check(mm)
        per_req = split_generation_output(mm, len(batch))
        harness.fresh.clear()
        if harness.cuda:
            # what crosses to the engine process, copied once per tensor with one sync per step
            per_req = host_copies_per_request(per_req, self.device, harness.fresh)
        for i, rid in enumerate(batch):
            if lasts[i]:
                self.finish(rid)
            results.append((rid, per_req[i], lasts[i]))
        return results
