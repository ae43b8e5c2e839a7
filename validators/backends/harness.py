"""The harness backend: omnitts's runner harness steps the model through its release's forward contract
(``validators/runtime/harness``), and this module turns the runs (shared per model through the
:class:`~omnitts.validators.runtime.context.ModelContext`) into observations."""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from omnitts.validators.backends.base import Backend, observes
from omnitts.validators.backends.workers import growth_loop, sync_report
from omnitts.validators.observations.audio import (
    ChunkObservation,
    ChunkPair,
    ConcurrencyObservation,
    ConcurrentRound,
    DeclaredSemantics,
    DurationObservation,
    DurationRow,
    OutputsObservation,
    PerfObservation,
    PerfRound,
    ReferenceObservation,
    ReferencePair,
    RequestAudio,
    SeedObservation,
    Source,
    StreamObservation,
    StreamPair,
    Timing,
)
from omnitts.validators.observations.model import (
    ConsumerForm,
    ConsumerObservation,
    CudaGraphObservation,
    GraphBreaksObservation,
    IntegrationObservation,
    LintFinding,
    LintObservation,
    ModelOutputsObservation,
    OptionalImportsObservation,
    PlacementObservation,
    PointResult,
    StepPayload,
)
from omnitts.validators.observations.parity import ParityObservation, ParityRequest
from omnitts.validators.observations.state import (
    AbortAttempt,
    AbortObservation,
    AliasObservation,
    GrowthObservation,
    HeldAfter,
    HostSyncObservation,
    Memory,
    StateFreedObservation,
    StateSnapshot,
    WorkerState,
)
from omnitts.validators.runtime import state
from omnitts.validators.runtime.context import CheckFailure, ModelContext, raise_failure
from omnitts.validators.runtime.harness import PASS, StopRun
from omnitts.validators.runtime.memory import rss_bytes
from omnitts.validators.runtime.scenarios import (
    compositions,
    declared_semantics,
    frames_for,
    offline_audio,
    short_plans,
)
from omnitts.validators.runtime.subject import RequestPlan
from omnitts.validators.runtime.timeouts import CheckTimeout, deadline

OPTIONAL = ("soundfile", "torchaudio", "torchcodec", "librosa")  # what a model must import without
# the payload key whose rows are a pattern's frames: codec codes (-1 rows: the stop step) or continuous latents
FRAMES_KEY = {"two-stage": "codes.audio", "single-stage": "codes.audio", "native-ar": "latent"}
SEQUENTIAL = 100  # requests of the growth loop
SEED = 1234  # the first seeded request's seed (the others count up from it)
ABORT_REPEATS = 3  # aborts at each offset


def numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().to("cpu").float().reshape(-1).numpy()
    return np.asarray(x, dtype=np.float32).reshape(-1)


def _frames(res, key: str) -> np.ndarray | None:
    """A request's frames: the rows of ``key`` in the entry stage's payloads (a two-stage talker's codes) or the
    final stage's, the stop step's all-negative code rows dropped."""
    rows = [p[key] for p in (res.upstream_payloads or res.payloads) if key in p]
    if not rows:
        return None
    frames = torch.cat([torch.as_tensor(r).detach().cpu().reshape(-1, r.shape[-1]) for r in rows]).numpy()
    if frames.dtype.kind == "i":
        frames = frames[~np.all(frames < 0, axis=1)].astype(np.int64)
    return frames


def streamed(ext: str, res, text: str | None = None) -> RequestAudio:
    """A request's streamed audio, with the size of each delta."""
    return RequestAudio(ext, numpy(res.stream_audio), res.sample_rate, tuple(d.numel() for d in res.deltas), text)


def text_of(plan) -> str | None:
    """The text a request asks for (``additional_information['text']``, list-wrapped as the runner carries it)."""
    text = plan.additional_information.get("text")
    text = text[0] if isinstance(text, list) and text else text
    return text if isinstance(text, str) else None


def memory(models: list, device: str) -> Memory:
    """The process's resident set, the tensors the models hold beyond their weights, CUDA memory allocated."""
    import gc

    gc.collect()
    cuda = int(torch.cuda.memory_allocated()) if device.startswith("cuda") and torch.cuda.is_initialized() else None
    return Memory(rss_bytes(), state.held_bytes(models), cuda)


class HarnessBackend(Backend):
    name, title = "harness", "omnitts's harness"

    def __init__(self, ctx: ModelContext) -> None:
        self.ctx = ctx

    @property
    def source(self) -> Source:
        return Source(self.name, self.ctx.options.device)

    def _texts(self) -> dict[str, str | None]:
        return {p.ext_id: text_of(p) for p in self.ctx.subject.prompts}

    def _longest(self):
        runs = self.ctx.solo_runs()
        ext = max(runs, key=lambda e: len(runs[e].requests[e].deltas))
        return ext, runs[ext].requests[ext]

    # ------------------------------------------------------------------------------------------ I1
    @observes(StreamObservation)
    def stream(self) -> StreamObservation:
        sub, ctx = self.ctx.subject, self.ctx
        declared, _ = declared_semantics(sub.final_stage.cls)
        pairs, source = [], ""
        for ext, run in ctx.solo_runs().items():
            res, source = run.requests[ext], run.consolidation
            got = streamed(ext, res, self._texts().get(ext))
            if declared == "cumulative" and res.deltas:  # a cumulative stream's last delta is the whole audio
                last = res.deltas[-1].reshape(-1)
                got = RequestAudio(ext, numpy(last), res.sample_rate, (last.numel(),))
            raw = (res.offline or {}).get("audio")
            if isinstance(raw, list):
                last = RequestAudio(ext, numpy(raw[-1] if raw else []), res.sample_rate)
                pairs.append(StreamPair(ext, got, last, whole_chunks=len(raw)))
            else:
                pairs.append(
                    StreamPair(ext, got, RequestAudio(ext, numpy(offline_audio(res.offline)), res.sample_rate))
                )
        about = {
            "pattern": sub.pattern,
            "consolidation": source,
            "release": ctx.contract.version,
            "declared": declared or "undeclared",
        }
        return StreamObservation(self.source, tuple(pairs), f"consolidation: {source}", about=about)

    @observes(DeclaredSemantics)
    def declared(self) -> DeclaredSemantics:
        cls = self.ctx.subject.final_stage.cls
        declared, doc = declared_semantics(cls)
        ext, res = self._longest()
        owner = f"{cls.__module__}.{cls.__qualname__}"
        return DeclaredSemantics(owner, declared, doc, streamed(ext, res), self.ctx.contract.version)

    @observes(ReferenceObservation)
    def reference(self) -> ReferenceObservation:
        sub, ctx = self.ctx.subject, self.ctx
        if sub.reference is None:
            return ReferenceObservation(self.source, (), f"{sub.name}: no reference implementation to compare with")
        runs, pairs = ctx.solo_runs(), []
        for plan in sub.prompts:
            res = runs[plan.ext_id].requests[plan.ext_id]
            with ctx.guard(f"reference implementation for {plan.ext_id}"):
                ref = numpy(torch.as_tensor(sub.reference(plan)))
            pairs.append(ReferencePair(streamed(plan.ext_id, res), RequestAudio(plan.ext_id, ref, sub.sample_rate)))
        return ReferenceObservation(self.source, tuple(pairs))

    @observes(ParityObservation)
    def parity(self) -> ParityObservation:
        """``--reference CAPTURE``: the capture's texts through the harness, each alone (frames, waveform) and all at
        once (waveforms); the harness does not run a decoder alone (``--engine offline`` does)."""
        from omnitts.validators.parity.capture_file import read_capture
        from omnitts.validators.parity.engine import reference_name

        ctx, sub = self.ctx, self.ctx.subject
        if ctx.options.engine.reference is None:
            raise CheckFailure("the parity checks compare with a reference capture: pass --reference CAPTURE")
        capture = read_capture(ctx.options.engine.reference)
        encode = getattr(sub.stages[0].config, "encode_text", None)
        if encode is None:  # the harness tokenizes as omnitts's tiny models do; a real tokenizer needs the engine
            raise CheckFailure(f"{sub.name}: its config has no encode_text; run the parity checks at --engine offline")
        plans = [RequestPlan(r.id, list(encode(r.text)), {"text": [r.text]}, max_tokens=512) for r in capture.requests]
        together = ctx.run("parity:batched", plans)
        requests = []
        for plan, req in zip(plans, capture.requests, strict=True):
            res = ctx.run(f"parity:{req.id}", [plan]).requests[req.id]
            frames = _frames(res, FRAMES_KEY.get(sub.pattern, "codes.audio"))
            latent = frames is not None and frames.dtype.kind == "f"
            requests.append(
                ParityRequest(
                    **req.reference_side(),
                    codes=None if latent else frames,
                    latents=frames if latent else None,
                    waveform=numpy(res.stream_audio),
                    batched=numpy(together.requests[req.id].stream_audio),
                )
            )
        return ParityObservation(
            self.source,
            str(capture.folder),
            reference_name(capture),
            sub.name,
            None,  # omnitts's own models: no release's by-design differences apply
            capture.dtype,
            tuple(requests),
            sample_rate=capture.sample_rate,
            decoder_alone=False,
        )

    @observes(DurationObservation)
    def duration(self) -> DurationObservation:
        sub, rows = self.ctx.subject, []
        for ext, run in self.ctx.solo_runs().items():
            res = run.requests[ext]
            off = (res.offline or {}).get("sr")
            offline_sr = int(torch.as_tensor(off).reshape(-1)[-1]) if off is not None else None
            rows.append(DurationRow(streamed(ext, res), offline_sr, frames_for(sub, res)))
        return DurationObservation(sub.name, tuple(rows), sub.sample_rate, sub.hop_length, True, True)

    @observes(ModelOutputsObservation)
    def model_outputs(self) -> ModelOutputsObservation:
        payloads, silent = [], []
        for ext, run in self.ctx.solo_runs().items():
            res = run.requests[ext]
            for j, payload in enumerate(res.payloads):
                val = payload.get("model_outputs", payload.get("audio"))
                tensor = isinstance(val, torch.Tensor)
                dtype, shape = (str(val.dtype), tuple(val.shape)) if tensor else (None, None)
                payloads.append(StepPayload(ext, j, tuple(sorted(payload)), dtype, shape, "sr" in payload))
            if not res.payloads:
                silent.append(ext)
        return ModelOutputsObservation(tuple(payloads), tuple(silent), self.ctx.options.device)

    # ------------------------------------------------------------------------------------------ I2
    @observes(ConsumerObservation)
    def consumer(self) -> ConsumerObservation:
        sub = self.ctx.subject
        consumer = sub.consumer
        if consumer is None:
            why = (
                f"I2: {sub.name}: no consumer function of multimodal_output['audio'] found (expected "
                "as_waveform(audio) in the example end2end.py, or Subject.consumer)"
            )
            return ConsumerObservation(None, unavailable=why)
        _, res = self._longest()
        deltas = [d.reshape(-1).float() for d in res.deltas]
        full = torch.cat(deltas) if deltas else torch.zeros(0)
        first = full[:1] if full.numel() else torch.zeros(1)
        forms = {
            "Tensor[N]": (full.clone(), full),
            "Tensor[1,N]": (full.reshape(1, -1).clone(), full),
            "list[Tensor] (pre-consolidation snapshot)": ([d.clone() for d in deltas], full),
            "list[Tensor[1,n]]": ([d.reshape(1, -1).clone() for d in deltas], full),
            "np.ndarray": (full.numpy().copy(), full),
            "scalar 0-d Tensor": (full[:1].reshape(()).clone() if full.numel() else torch.tensor(0.0), first),
            "python float": (float(full[0]) if full.numel() else 0.0, first),
            f"release {self.ctx.contract.version} offline output": (
                res.offline.get("audio") if res.offline else None,
                offline_audio(res.offline),
            ),
        }
        found = []
        for name, (value, want) in forms.items():
            try:
                got = consumer(value)
                got = numpy(got if isinstance(got, torch.Tensor) else np.asarray(got))
            except Exception as exc:  # noqa: BLE001 - the consumer's failure is what is observed
                found.append(ConsumerForm(name, numpy(want), error=f"{type(exc).__name__}: {exc}"))
                continue
            found.append(ConsumerForm(name, numpy(want), got))
        origin = sub.consumer_origin or getattr(consumer, "__qualname__", str(consumer))
        return ConsumerObservation(origin, tuple(found))

    # ------------------------------------------------------------------------------------------ I3
    @observes(HostSyncObservation)
    def host_syncs(self) -> HostSyncObservation:
        from omnitts.validators.runtime.syncspy import SyncSpy

        ctx, sub = self.ctx, self.ctx.subject
        plans, kw = compositions(sub)["all_at_once"]
        # 4 concurrent requests, 10 steps each: enough steady-state steps; the spy makes every op a Python call
        plans = [replace(p, max_tokens=min(p.max_tokens, 10)) for p in plans[:4]]
        spy = SyncSpy(sub.model_files, device=ctx.options.device)  # one-time torch._dynamo import, outside the deadline
        with ctx.guard("I3 sync count"):
            if ctx.options.device == "cuda":
                ctx.harness(**kw).run(plans, "i3-warmup")  # warm-up (and any graph capture) before arming
            harness = ctx.harness(spy=spy, **kw)
            harness.spy_active = True
            run = harness.run(plans, "i3-syncs")
        steady = {f"stage{s.stage} step {s.step}": len(s.req_ids) for s in run.steps if s.steady}
        report = sync_report(spy.report, steady, ctx.options.device)
        return HostSyncObservation((report,), sub.sync_budget_per_request_step)

    @observes(GraphBreaksObservation)
    def graph_breaks(self) -> GraphBreaksObservation:
        from omnitts.validators.runtime.syncspy import graph_breaks

        ctx, sub = self.ctx, self.ctx.subject
        plans = [replace(sub.prompts[0], arrive_step=0, abort_step=None)]  # one request: a smaller graph to trace
        found: dict = {}

        def intercept(stage, method, fn, args, kwargs):
            if stage != 0 or method != "__call__":
                return PASS
            infos = next((kwargs.get(k) for k in ctx.contract.buffer_kwargs if kwargs.get(k) is not None), None)
            decoding = kwargs["input_ids"].shape[0] == len(infos or [1])
            if not decoding or harness.step_index < 2:
                return PASS
            found.update(graph_breaks(fn, *args, **kwargs))
            raise StopRun()

        import torch._dynamo  # noqa: F401  (seconds of import time, outside the deadline)

        harness = ctx.harness()
        harness.intercept = intercept
        error = None
        try:
            with deadline(max(ctx.options.timeout, 120), f"{sub.name}: dynamo explain"):
                harness.run(plans, "i3-explain")
        except StopRun:
            pass
        except CheckTimeout as exc:
            ctx.hung = ctx.hung or "dynamo explain of the AR step"
            raise_failure(exc, "I3 graph-break count")
        except Exception as exc:  # noqa: BLE001 - tracing failures are reported, not fatal
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
        finally:
            torch._dynamo.reset()
        return GraphBreaksObservation(found or None, found.pop("error", None) or error)

    # ------------------------------------------------------------------------------------------ I4
    @observes(ConcurrencyObservation)
    def concurrency(self) -> ConcurrencyObservation:
        ctx, sub = self.ctx, self.ctx.subject
        if len(sub.prompts) < 4:
            return ConcurrencyObservation(self.source, (), (), sub.name, len(sub.prompts))
        solo = tuple(RequestAudio(ext, numpy(audio), sub.sample_rate) for ext, audio in ctx.solo_audio().items())
        rounds = []
        for name in compositions(sub):
            run = ctx.composition(name)
            widest = max((len(s.req_ids) for s in run.steps if s.stage == 0), default=0)
            got = tuple(streamed(ext, res) for ext, res in run.requests.items() if not res.aborted)
            rounds.append(ConcurrentRound(name, got, widest, 4 if name == "all_at_once" else None))
        return ConcurrencyObservation(self.source, solo, tuple(rounds), sub.name, len(sub.prompts))

    @observes(SeedObservation)
    def seeded(self) -> SeedObservation:
        """Four requests with their own seeds alone, then together (at once, in reverse, staggered, one of them
        twice), as the release's runner hands a seed to the model (``_omni_seed``, from 0.28)."""
        ctx, sub = self.ctx, self.ctx.subject
        contract = ctx.contract
        if not contract.writes_omni_sampling_keys:
            why = (
                f"vLLM-Omni {contract.version}'s runner does not hand a request's seed to the model (it writes "
                "`_omni_seed` from 0.28): a model that samples inside forward() cannot be seeded there"
            )
            return SeedObservation(self.source, unavailable=why)
        if len(sub.prompts) < 4:
            return SeedObservation(self.source, unavailable=f"{sub.name} has {len(sub.prompts)} prompts; needs 4")
        base = [replace(p, arrive_step=0, abort_step=None, seed=SEED + i) for i, p in enumerate(sub.prompts[:4])]
        texts = self._texts()
        solo = tuple(
            streamed(p.ext_id, ctx.run(f"seed:solo:{p.ext_id}", [p]).requests[p.ext_id], texts.get(p.ext_id))
            for p in base
        )
        twice = replace(base[0], ext_id=f"{base[0].ext_id}#2")
        rounds_plans = {
            "seeded_at_once": base,
            "seeded_reversed": [replace(p, arrive_step=len(base) - 1 - i) for i, p in enumerate(base)],
            "seeded_staggered": [replace(p, arrive_step=2 * i) for i, p in enumerate(base)],
            "seeded_twice": [base[0], base[1], twice, base[2]],
        }
        rounds = []
        for name, plans in rounds_plans.items():
            run = ctx.run(f"seed:{name}", plans)
            got = []
            for p in plans:
                label = p.ext_id.split("#", 1)[0]
                audio = streamed(label, run.requests[p.ext_id], texts.get(label))
                got.append(audio)
            rounds.append(ConcurrentRound(name, tuple(got)))
        other = replace(base[0], seed=SEED + 100)
        reseeded = streamed(other.ext_id, ctx.run("seed:reseeded", [other]).requests[other.ext_id])
        seeds = {p.ext_id: p.seed for p in base}
        about = {"seed_key": "_omni_seed", "release": contract.version}
        return SeedObservation(self.source, solo, seeds, tuple(rounds), reseeded, about=about)

    @observes(OutputsObservation)
    def outputs(self) -> OutputsObservation:
        texts = self._texts()
        found = tuple(streamed(ext, run.requests[ext], texts.get(ext)) for ext, run in self.ctx.solo_runs().items())
        return OutputsObservation(self.source, found)

    # ------------------------------------------------------------------------------------------ I5
    @observes(AbortObservation)
    def aborts(self) -> AbortObservation:
        """The longest request aborted at three offsets into its stream (a third, two thirds, after its first
        step), three times each, beside a request that finishes; state and memory against a baseline taken after a
        warm-up request."""
        ctx, sub = self.ctx, self.ctx.subject
        ext, longest = self._longest()
        plan = next(p for p in sub.prompts if p.ext_id == ext)
        companion = min(sub.prompts, key=lambda p: len(p.prompt_token_ids))
        steps = max(longest.finish_step or len(longest.deltas), 3)
        offsets = sorted({1, max(2, steps // 3), max(3, 2 * steps // 3)})
        offsets = [k for k in offsets if k < steps] or [1]
        device = ctx.options.device
        attempts, ids = [], {}
        with ctx.guard("I5 aborts at several offsets", max(ctx.options.timeout, 120)):
            harness = ctx.harness()
            # the warm-up serves the same pair to its end: caches keyed by batch shape exist before the baseline
            warm = [replace(plan, ext_id="warm-up", arrive_step=0, abort_step=None)]
            harness.run([*warm, replace(companion, ext_id="warm-up-beside", arrive_step=0, abort_step=None)], "warm-up")
            before = StateSnapshot((WorkerState(tuple(state.containers(harness.models))),))
            memory_before = memory(harness.models, device)
            for rep in range(ABORT_REPEATS):
                for k in offsets:
                    victim = replace(plan, ext_id=f"aborted-{k}-{rep}", arrive_step=0, abort_step=k)
                    beside = replace(companion, ext_id=f"beside-{k}-{rep}", arrive_step=0, abort_step=None)
                    res = harness.run([victim, beside], f"abort-{k}-{rep}").requests[victim.ext_id]
                    received = sum(1 for d in res.deltas if d.numel())
                    interrupted = res.aborted and received > 0 and not res.finished
                    attempts.append(AbortAttempt(f"after {k} steps", victim.ext_id, received, interrupted))
                    ids[victim.ext_id] = f"global_request_id of {victim.ext_id}"
                    ids.update({rid: f"stage-{s} scheduler id of {victim.ext_id}" for s, rid in res.stage_ids.items()})
            served = harness.run([replace(companion, ext_id="after-aborts", abort_step=None)], "after-aborts")
            ok = served.requests["after-aborts"].finished
            del served, res
            after = StateSnapshot((WorkerState(tuple(state.containers(harness.models))),))
            memory_after = memory(harness.models, device)
        return AbortObservation(
            tuple(attempts),
            before,
            after,
            (memory_before,),
            (memory_after,),
            ids,
            None if ok else "it did not finish",
            device=device,
        )

    @observes(StateFreedObservation)
    def state_freed(self) -> StateFreedObservation:
        moments = []
        for name in ("all_at_once", "with_abort"):
            run = self.ctx.composition(name)  # shared with I4; run.models are the stage models after the run drained
            ids, aborted = {}, set()
            for ext, res in run.requests.items():
                mine = {ext: f"global_request_id of {ext}"}
                mine.update({rid: f"stage-{stage} scheduler id of {ext}" for stage, rid in res.stage_ids.items()})
                ids.update(mine)
                aborted |= set(mine) if res.aborted else set()
            snapshot = StateSnapshot((WorkerState(tuple(state.containers(run.models))),))
            moments.append(HeldAfter("finish", name, snapshot, ids, frozenset(aborted)))
        contract = self.ctx.contract
        about = {
            "finish_hook_ar": contract.ar_notifies_finish,
            "finish_hook_generation": contract.generation_notifies_finish,
            "id_key": contract.preprocess_id_key,
        }
        return StateFreedObservation(
            tuple(moments), release=contract.version, id_key=contract.preprocess_id_key, about=about
        )

    @observes(GrowthObservation)
    def growth(self) -> GrowthObservation:
        ctx = self.ctx
        plans = short_plans(ctx.subject, SEQUENTIAL, max_tokens=3)
        with ctx.guard(f"I5 {SEQUENTIAL} sequential requests", max(ctx.options.timeout, 120)):
            harness = ctx.harness()

            def send(i: int) -> None:
                harness.run([plans[i]], f"i5-seq-{plans[i].ext_id}")

            def snapshot() -> StateSnapshot:
                return StateSnapshot((WorkerState(tuple(state.containers(harness.models))),))

            before, after = growth_loop(send, snapshot, len(plans))
        return GrowthObservation(len(plans), before, after)

    @observes(AliasObservation)
    def aliasing(self) -> AliasObservation:
        run = self.ctx.composition("all_at_once")  # the shared run checks aliasing at every step
        return AliasObservation(tuple(run.alias_violations), self.ctx.subject.pattern)

    # ------------------------------------------------------------------------------------------ phases 4, 5, perf
    @observes(ChunkObservation)
    def chunks(self) -> ChunkObservation:
        ctx, sub = self.ctx, self.ctx.subject
        if not sub.two_stage:
            return ChunkObservation(self.source, (), f"{sub.pattern}: single-stage patterns skip Phase 4 (async_chunk)")
        plans, _ = compositions(sub)["all_at_once"]
        whole = {"codec_chunk_frames": 10**6, "codec_left_context_frames": 0, "initial_codec_chunk_frames": 0}
        full = ctx.run("chunk:full", plans, connector_extra=whole)
        left = int(sub.connector_extra.get("codec_left_context_frames", 0) or 0)
        small = {"codec_chunk_frames": 3, "codec_left_context_frames": max(left, 1)}
        pairs = []
        for config, extra in {"deploy": None, "small_chunks": small}.items():
            run = (
                ctx.composition("all_at_once")
                if extra is None
                else ctx.run(f"chunk:{config}", plans, connector_extra=extra)
            )
            for ext, res in run.requests.items():
                ref = full.requests[ext]
                pairs.append(
                    ChunkPair(config, streamed(ext, res), RequestAudio(ext, numpy(ref.stream_audio), res.sample_rate))
                )
        return ChunkObservation(self.source, tuple(pairs), about={"connector": dict(sub.connector_extra)})

    @observes(CudaGraphObservation)
    def cuda_graph(self) -> CudaGraphObservation:
        ctx, sub = self.ctx, self.ctx.subject
        if ctx.options.device != "cuda":
            return CudaGraphObservation(False, unavailable="CUDA-graph check needs --device cuda")
        if not torch.cuda.is_available():
            raise_failure(AssertionError("--device cuda but torch.cuda.is_available() is False"), "CUDA graph")
        cfg = sub.ar_stage.config
        if sub.graph_step is not None:
            res = sub.graph_step(device=ctx.options.device)
            return CudaGraphObservation(bool(res.get("tokens_equal", False)), timings=res)
        if cfg is None or not hasattr(cfg, "use_cuda_graph"):
            why = "the AR stage exposes no CUDA-graph switch (config.use_cuda_graph) nor Subject.graph_step"
            return CudaGraphObservation(False, unavailable=why)
        plans, kw = compositions(sub)["all_at_once"]
        timings, tokens = {}, {}
        for mode in (False, True):
            mcfg = copy.deepcopy(cfg)
            mcfg.use_cuda_graph = mode
            models = [sub.stages[0].cls(config=mcfg)] + [st.factory() for st in sub.stages[1:]]
            harness = ctx.harness(models=[m.to(ctx.options.device).eval() for m in models], **kw)
            harness.run(plans, f"graph-warmup-{mode}")  # captures the graphs of every batch size the scenario uses
            harness.timed_calls = {(0, "preprocess"), (0, "__call__"), (0, "compute_logits")}
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            run = harness.run(plans, f"graph-{mode}")
            torch.cuda.synchronize()
            timings[mode] = {
                "wall_s": time.perf_counter() - t0,
                "stage0_steady_s": sum(s.seconds for s in run.steps if s.stage == 0 and s.steady),
                "ar_step_s": sum(harness.call_seconds.values()),  # preprocess + forward + compute_logits, synced
                "forward_s": harness.call_seconds.get((0, "__call__"), 0.0),
            }
            tokens[mode] = {e: r.tokens for e, r in run.requests.items()}
        eager, graph = timings[False], timings[True]
        measured = {
            "eager_ar_step_s": round(eager["ar_step_s"], 5),
            "graph_ar_step_s": round(graph["ar_step_s"], 5),
            "speedup": round(eager["ar_step_s"] / graph["ar_step_s"], 3) if graph["ar_step_s"] > 0 else None,
            "forward_speedup": round(eager["forward_s"] / graph["forward_s"], 3) if graph["forward_s"] else None,
            "eager_stage0_s": eager["stage0_steady_s"],
            "graph_stage0_s": graph["stage0_steady_s"],
            "wall_eager_s": eager["wall_s"],
            "wall_graph_s": graph["wall_s"],
        }
        differing = tuple(e for e in tokens[True] if tokens[True][e] != tokens[False][e])
        return CudaGraphObservation(tokens[True] == tokens[False], differing, measured)

    @observes(PerfObservation)
    def perf(self) -> PerfObservation:
        ctx, sub = self.ctx, self.ctx.subject
        solo = ctx.solo_runs()
        runs = {
            "solo": [(e, solo[e].requests[e]) for e in solo],
            "all_at_once": ctx.composition("all_at_once").requests,
        }
        rounds = []
        for name, items in runs.items():
            timings = []
            for ext, res in dict(items).items():
                audio_s = res.stream_audio.numel() / (res.sample_rate or sub.sample_rate)
                first = () if res.t_first_audio is None else (res.t_first_audio - res.t_arrive,)
                latency = None if res.t_finish is None else res.t_finish - res.t_arrive
                timings.append(Timing(ext, audio_s, latency, first))
            rounds.append(PerfRound(name, tuple(timings)))
        return PerfObservation(self.source, tuple(rounds))

    # ------------------------------------------------------------------------------------------ the model's files
    @observes(OptionalImportsObservation)
    def optional_imports(self) -> OptionalImportsObservation:
        sub = self.ctx.subject
        modules = tuple(sorted({st.cls.__module__ for st in sub.stages if st.cls is not None}))
        if not modules:
            return OptionalImportsObservation((), OPTIONAL, (), "no stage classes to import")
        saved = {name: sys.modules.pop(name) for name in modules if name in sys.modules}
        blocked = {dep: sys.modules.get(dep) for dep in OPTIONAL}
        problems = []
        try:
            for dep in OPTIONAL:
                sys.modules[dep] = None  # makes `import dep` raise ImportError
            for name in modules:
                try:
                    spec = getattr(saved.get(name), "__spec__", None)
                    if spec is not None and spec.loader is not None:
                        fresh = importlib.util.module_from_spec(spec)  # works for modules loaded from a file path too
                        sys.modules[name] = fresh
                        spec.loader.exec_module(fresh)
                    else:
                        importlib.import_module(name)
                except ImportError as exc:
                    problems.append(f"{name}: {exc} (import it lazily, at the top of load_weights(), with a fallback)")
                except Exception as exc:  # noqa: BLE001
                    problems.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            for name in modules:
                sys.modules.pop(name, None)
            sys.modules.update(saved)
            for dep, mod in blocked.items():
                if mod is None:
                    sys.modules.pop(dep, None)
                else:
                    sys.modules[dep] = mod
        return OptionalImportsObservation(modules, OPTIONAL, tuple(problems))

    @observes(LintObservation)
    def lint(self) -> LintObservation:
        sub = self.ctx.subject
        stage0 = sub.stages[0].cls
        pkg = Path(inspect.getfile(stage0)).resolve().parent if stage0 is not None else None
        if pkg is None:
            return LintObservation("", problem=f"static checks: cannot locate the model package of {sub.name}")
        try:
            from omnitts.validators.static import api
        except ModuleNotFoundError as exc:
            why = (
                f"static checks unavailable: {exc.name} is missing, so the static half of the validation did not "
                "run (fail closed; install omnitts with its static validators)"
            )
            return LintObservation(str(pkg), problem=why)
        tree_root = Path(sub.extra["root"]) if sub.kind == "tree" else None
        try:
            found = api.lint_model_package(pkg, tree_root=tree_root)
        except Exception as exc:  # noqa: BLE001 - the static half failed: fail closed with its message
            why = f"static checks could not run on {pkg} (fail closed): {type(exc).__name__}: {exc}"
            return LintObservation(str(pkg), problem=why)
        findings = tuple(
            LintFinding(str(f.path), int(f.line), f.rule, getattr(f, "invariant", ""), f.message, f.severity)
            for f in found
        )
        return LintObservation(str(pkg), findings, (), bool(sub.extra.get("deploy")))

    @observes(IntegrationObservation)
    def integration(self) -> IntegrationObservation:
        sub = self.ctx.subject
        if sub.kind != "tree":
            why = f"{sub.name} is not in a vLLM-Omni tree (registry and serving points exist only there: "
            why += "pass --omni-root)"
            return IntegrationObservation(sub.name, "", unavailable=why)
        from omnitts.knowledge.eras import detect_profile
        from omnitts.scaffold.check import GAPS, check_model

        root = sub.extra["root"]
        try:
            reports = check_model(detect_profile(root), sub.name)
        except Exception as exc:  # noqa: BLE001 - the check could not run: fail closed with its message
            why = f"integration points of {sub.name} in {root}: {type(exc).__name__}: {exc}"
            return IntegrationObservation(sub.name, root, problem=why)
        points = tuple(
            PointResult(r.point, r.status, r.detail, r.status in GAPS) for report in reports for r in report.results
        )
        return IntegrationObservation(sub.name, root, points)

    @observes(PlacementObservation)
    def placement(self) -> PlacementObservation:
        ctx, sub = self.ctx, self.ctx.subject
        if not ctx.options.device.startswith("cuda"):
            why = "device placement needs --device cuda (on the CPU every tensor is on the host)"
            return PlacementObservation((), (), why)
        if not sub.two_stage:
            return PlacementObservation((), (), "single-stage model: no stage boundary to cross")
        devices = ctx.stage_devices() or [ctx.options.device] * len(sub.stages)
        runs = dict(ctx.solo_runs())
        runs["staggered"] = ctx.composition("staggered")
        findings: list[str] = []
        for name, run in runs.items():
            findings.extend(f"{name}: {line}" for line in run.placement_findings if f"{name}: {line}" not in findings)
        return PlacementObservation(tuple(devices), tuple(findings))
