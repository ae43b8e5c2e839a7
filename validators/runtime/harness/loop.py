"""The harness loop: admits a scenario's requests, steps stage 0 then stage 1 each engine step, carries stage 0's
payloads through the stage input processor (``distributed/.../chunk_transfer_adapter.py``), and hands final-stage
payloads to the output processor (copied to the host, streamed as deltas, consolidated by the release's era)."""

from __future__ import annotations

import contextlib
import copy
import time
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import torch

from omnitts.knowledge.runner import RunnerContract, consolidation_era
from omnitts.validators.runtime.consolidation import EraAccumulator
from omnitts.validators.runtime.harness.errors import ContractError, ModelError
from omnitts.validators.runtime.harness.hostcopy import delivered, misplaced, to_host
from omnitts.validators.runtime.harness.payloads import (
    flatten_payload,
    is_payload_struct,
    struct_to_dict,
    unflatten_payload,
)
from omnitts.validators.runtime.harness.results import RequestResult, RunResult, StepRecord
from omnitts.validators.runtime.harness.scheduling import Req, sched_id
from omnitts.validators.runtime.harness.stages import ARStage, GenerationStage, Stage
from omnitts.validators.runtime.subject import RequestPlan, RuntimeSubject


class TransferManager:
    """The attributes a 0.20 ``*_async_chunk`` stage input processor reads off its transfer manager."""

    def __init__(self, extra: dict, max_num_seqs: int):
        self.code_prompt_token_ids: dict[str, list] = defaultdict(list)
        self.request_payload: dict[str, Any] = {}
        self.connector = SimpleNamespace(config={"extra": dict(extra)})
        self.scheduler_max_num_seqs = max_num_seqs


class Harness:
    """Runs scenarios (lists of :class:`RequestPlan`) through a subject's stages."""

    def __init__(
        self,
        subject: RuntimeSubject,
        *,
        device: str = "cpu",
        contract: RunnerContract | None = None,
        consolidation_factory=None,
        consolidation_source: str | None = None,
        async_chunk: bool = True,
        connector_extra: dict | None = None,
        models: list | None = None,
        gen_max_batch: int | None = None,
        stage0_max_num_seqs: int | None = None,
        max_steps: int = 5000,
        check_aliasing: bool = False,
        stage_devices: list[str] | None = None,
        spy=None,
        record_calls: bool = False,
        salt: str = "",
    ):
        self.subject = subject
        # each stage's device: stage_devices (a two-stage model split over two GPUs), else every stage on device
        self.stage_devices = list(stage_devices) if stage_devices else [device] * len(subject.stages)
        if len(self.stage_devices) != len(subject.stages):
            raise ContractError(f"{len(self.stage_devices)} stage devices for {len(subject.stages)} stages")
        self.device = self.stage_devices[0]
        self.split = len(set(self.stage_devices)) > 1
        self.placement_findings: list[str] = []
        self.contract = contract or subject.contract()
        self.era = subject.consolidation_era or consolidation_era(self.contract.version)
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
        self.cuda = any(str(d).startswith("cuda") for d in self.stage_devices)
        self.alias_violations: list[str] = []
        self.fresh: dict[int, torch.Tensor] = {}  # private host copies of the current step (see hostcopy.to_host)
        self.recorder: list | None = [] if record_calls else None
        self.salt = salt
        self.models = models if models is not None else subject.build(device, self.stage_devices)
        self.stages: list[Stage] = []
        for i, (st, m) in enumerate(zip(subject.stages, self.models, strict=True)):
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

    # -- device placement -------------------------------------------------------------------------
    def note_misplaced(self, found: list[str]) -> None:
        """Record tensors found off their device (each line once, at most 40)."""
        for line in found:
            if line not in self.placement_findings and len(self.placement_findings) < 40:
                self.placement_findings.append(line)

    def on_stage_device(self, stage: int):
        """The stage's device as the current CUDA device, as in the release's per-stage process (whose
        ``CUDA_VISIBLE_DEVICES`` is the stage's ``devices``, so ``"cuda"`` means its own GPU); a no-op unless the
        stages run on different CUDA devices."""
        dev = self.stage_devices[stage]
        if self.split and str(dev).startswith("cuda"):
            return torch.cuda.device(torch.device(dev))
        return contextlib.nullcontext()

    def cross(self, produced: Any, where: str) -> Any:
        """What a stage input processor returned, as the next stage receives it: the release's connector serialises
        every tensor to the host, so a tensor the processor left on a device is a finding (a device copy per chunk
        in the sender, and a tensor that in an in-process pipeline would reach the next stage on the producer's
        device) and is delivered on the host."""
        if self.cuda:
            consumer = self.stage_devices[1] if len(self.stage_devices) > 1 else "cpu"
            found = misplaced(produced, "cpu", where)
            why = f"(the producer's device; stage 1 runs on {consumer}, chunks reach it via the host)"
            self.note_misplaced([f"{line} {why}" for line in found])
        return delivered(produced)

    # -- per-request output path ------------------------------------------------------------------
    def _emit_final(self, ext: str, payload: dict, now: float) -> None:
        res = self.results[ext]
        flat = flatten_payload(payload)
        if "hidden" in flat and ("model_outputs" in flat or "audio" in flat):
            # the output processor renames "hidden" to the audio key first and "model_outputs" overwrites it
            flat = {k: v for k, v in flat.items() if k != "hidden"}
        flat = to_host(flat, self.fresh)
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
        self.placement_findings = []
        s0 = self.stages[0]
        s1 = self.stages[1] if len(self.stages) > 1 else None
        tm = TransferManager(self.extra, 4)
        ids: dict[str, dict[int, str]] = {}
        by_step: dict[int, list[RequestPlan]] = defaultdict(list)
        for p in plans:
            by_step[p.arrive_step].append(p)
        aborts = {p.ext_id: p.abort_step for p in plans if p.abort_step is not None}
        stage0_req_obj: dict[str, Req] = {}
        self._upstream_accs: dict[str, EraAccumulator] = {}
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
                    self._admit(p, ids, now)
                    stage0_req_obj[p.ext_id] = s0.requests[ids[p.ext_id][0]]
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
                        self.results[ext].upstream_payloads.append(payload)
                        if self.async_chunk:
                            self._transfer(ext, req, payload, done, ids, tm, s1)
                        else:
                            self._transfer_whole(ext, req, payload, done, ids, s1)
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
                    self._raise_if_stuck(open_reqs, s0, s1)
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
            contract=self.contract,
            calls=self.recorder,
            alias_violations=list(self.alias_violations),
            stage_devices=list(self.stage_devices),
            placement_findings=list(self.placement_findings),
        )

    def _admit(self, p: RequestPlan, ids: dict, now: float) -> None:
        """A new request: its result record, its accumulator, and its stage-0 request with ``global_request_id``."""
        rid0 = sched_id(p.ext_id, 0, self.salt)
        ids[p.ext_id] = {0: rid0}
        res = RequestResult(p.ext_id, stage_ids=ids[p.ext_id], eos=self.subject.eos_token_id)
        res.t_arrive = now
        self.results[p.ext_id] = res
        self._accs[p.ext_id] = self._new_acc()
        info = copy.deepcopy(p.additional_information)
        info["global_request_id"] = [p.ext_id]
        self.stages[0].add(rid0, p.ext_id, p.prompt_token_ids, info, p.max_tokens, p.seed)

    @staticmethod
    def _raise_if_stuck(open_reqs: set[str], s0: Stage, s1: GenerationStage | None) -> None:
        s0_busy = any(not r.finished for r in s0.requests.values())
        s1_busy = s1 is not None and any(s1.chunks.get(r) for r in s1.requests)
        if not s0_busy and not s1_busy:
            raise ContractError(
                f"requests {sorted(open_reqs)} never finished: stage 0 is done but no final chunk"
                " (meta.finished) reached the decoder; the stage input processor must emit one"
            )

    def _finish(self, ext: str) -> None:
        res = self.results[ext]
        res.finished = True
        res.t_finish = time.perf_counter()
        res.finish_step = self.step_index
        res.offline = self._accs[ext].consolidate()

    def _abort(self, ext: str, ids: dict, tm: TransferManager) -> None:
        res = self.results[ext]
        res.aborted = True
        res.t_finish = time.perf_counter()
        res.finish_step = self.step_index
        self.stages[0].finish(ids[ext][0], aborted=True)
        if len(self.stages) > 1 and 1 in ids[ext]:
            self.stages[1].abort(ids[ext][1])
        tm.code_prompt_token_ids.pop(ext, None)
        tm.request_payload.pop(ext, None)

    def _transfer_whole(self, ext: str, req: Req, payload: dict, done: bool, ids, s1: GenerationStage) -> None:
        """Without async chunk (``async_chunk: false``): stage 0's outputs are consolidated as the output processor
        does, and once the request finished the stage input processor (``talker2code2wav``) turns them into the
        decoder's prompt in one piece."""
        acc = self._upstream_accs.setdefault(ext, EraAccumulator(self.era))
        acc.add(payload, self.stages[0].spec.engine_output_type)
        if not done or req.aborted:
            return
        fn = self.subject.sync_fn
        if fn is None:
            raise ContractError(
                "two-stage subject run without async chunk but no stage input processor (talker2code2wav)"
            )
        source = SimpleNamespace(
            request_id=ext,
            finished=True,
            outputs=[SimpleNamespace(multimodal_output=unflatten_payload(acc.consolidate()), token_ids=list(req.out))],
        )
        t0 = time.perf_counter()
        try:
            prompts = fn([source])
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"stage input processor {getattr(fn, '__name__', fn)}", exc) from exc
        finally:
            self.model_seconds += time.perf_counter() - t0
        prompts = self.cross(prompts, f"stage input processor {getattr(fn, '__name__', fn)} (request {ext})")
        ids[ext][1] = sched_id(ext, 1, self.salt)
        for prompt in prompts or []:
            s1.add_chunk(
                ids[ext][1],
                ext,
                list(prompt["prompt_token_ids"]),
                dict(prompt.get("additional_information") or {}),
                True,
            )

    def _transfer(self, ext, req: Req, payload: dict, done: bool, ids, tm: TransferManager, s1: GenerationStage):
        fn = self.subject.async_chunk_fn
        if fn is None:
            raise ContractError("two-stage subject without an async-chunk stage input processor")
        # the step's payload is already flat and on the host (one device->host copy per output in step()); the
        # processor gets it unflattened, as from chunk_transfer_adapter (no second copy: I5's aliasing check
        # covers outputs that change after they were returned)
        request = SimpleNamespace(
            external_req_id=ext,
            request_id=req.rid,
            is_finished=req.is_finished,
            additional_information=None,
            prompt_token_ids=req.prompt,
            output_token_ids=list(req.out),
        )
        # keyword arguments only, the payload under the release's keyword (`pooling_output` to 0.22,
        # `multimodal_output` from 0.24), as chunk_transfer_adapter._send_single_request calls it
        kwargs = {
            "transfer_manager": tm,
            self.contract.chunk_payload_kwarg: unflatten_payload(payload),
            "request": request,
            "is_finished": done,
        }
        if self.recorder is not None:
            self.recorder.append(("proc", fn, (), copy.deepcopy(kwargs)))
        t0 = time.perf_counter()
        try:
            with self.on_stage_device(0):  # the processor runs in stage 0's process (chunk_transfer_adapter)
                chunk = fn(**kwargs)
        except Exception as exc:  # noqa: BLE001
            raise ModelError(f"stage input processor {getattr(fn, '__name__', fn)}", exc) from exc
        finally:
            self.model_seconds += time.perf_counter() - t0
        if done:
            tm.code_prompt_token_ids.pop(ext, None)
            tm.request_payload.pop(ext, None)
        if chunk is None:
            return
        # read as a dict first (a struct's tensors are then walked too), then as the next stage receives it
        chunk = self._chunk_dict(chunk, fn)
        chunk = self.cross(chunk, f"stage input processor {getattr(fn, '__name__', fn)} (request {ext})")
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
            ids[ext][1] = sched_id(ext, 1, self.salt)
        if not codes and not last:
            return
        s1.add_chunk(ids[ext][1], ext, codes, info, last)

    def _chunk_dict(self, chunk: Any, fn) -> dict:
        """The processor's window as the receiving adapter reads it (a dict), once it has the type the release's
        chunk transfer adapter needs: an ``OmniPayloadStruct`` from 0.22 (the adapter sets ``payload_data.meta`` as an
        attribute: a dict fails there, the request then gets no audio), a dict before (read with ``.get``)."""
        name, version = getattr(fn, "__name__", fn), self.contract.version
        if self.contract.chunk_payload_struct:
            if not is_payload_struct(chunk):
                raise ContractError(
                    f"the async-chunk processor {name} returned {type(chunk).__name__}; vLLM-Omni {version}'s chunk"
                    " transfer adapter needs an OmniPayloadStruct or None: return OmniPayloadStruct(codes=CodesStruct("
                    "audio=<1-D long tensor>), meta=MetaStruct(...)) from vllm_omni.data_entry_keys"
                )
            return struct_to_dict(chunk)
        if not isinstance(chunk, dict):
            raise ContractError(
                f"the async-chunk processor {name} returned {type(chunk).__name__}; vLLM-Omni {version}'s chunk"
                " transfer adapter reads a dict or None ({'codes': {'audio': ...}, 'meta': {...}})"
            )
        return chunk


def run_scenario(subject: RuntimeSubject, plans: list[RequestPlan], scenario: str = "", **harness_kwargs) -> RunResult:
    return Harness(subject, **harness_kwargs).run(plans, scenario)
