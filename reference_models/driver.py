"""A miniature of vLLM-Omni's engine (0.20-0.30 runner semantics), enough to run the reference models as served.

What it reproduces, and from where:

- AR stage step (``gpu_model_runner.py`` / ``gpu_ar_model_runner.py``): ``on_requests_finished(finished ids)`` at the
  start of a step; for ``has_preprocess`` models the scheduler id is written into each request's info dict
  (``info["request_id"] = req_id``) before ``preprocess(input_ids, input_embeds, **info)``; ``forward(...,
  runtime_additional_information=infos, model_intermediate_buffer=infos)`` with one dict per request in batch order
  (the same dict objects every step); ``make_omni_output`` when forward did not return an ``OmniOutput``;
  ``compute_logits`` on each request's last token, greedy sampling, EOS finishes the request; ``postprocess(hidden
  slice, multimodal_outputs=..., **info)`` per request after sampling, its update dict merged into the info dict.
- Generation stage step (``gpu_generation_model_runner.py``): flat input ids plus ``seq_token_counts``.
- Per-request payload split: a list value must have one entry per request; a tensor value goes to every request.
- Output accumulation and consolidation (``engine/output_processor.py``): ``model_outputs`` is renamed to the
  stage's modality (``audio``); per-step tensors accumulate in lists; at finish ``audio`` is concatenated along the
  last dim (0.20 behaviour) or, with ``consolidation="skip-audio"``, left as a list (0.14/0.16 behaviour, the
  ``continue`` the guide's invariant I1 warns about); ``sr`` keeps the last value; other keys concatenate on dim 0.
- Two-stage async chunk: the stage input processor's ``talker2code2wav_async_chunk`` runs after every stage-0 step
  with that step's per-request payload, windows go to stage 1; without async chunk ``talker2code2wav`` runs once
  per finished talker request on the consolidated output.

Streaming consumers copy each step's delta when they receive it (``RequestRecord.stream``); offline consumers read
the consolidated output at finish (``RequestRecord.offline``).
"""

from __future__ import annotations

import contextlib
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# --------------------------------------------------------------------------------------------------------------------
# Host-sync spy (invariant I3)
# --------------------------------------------------------------------------------------------------------------------

_SYNC_OPS = {"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.nonzero.out"}
_SYNC_METHODS = ("item", "tolist", "cpu", "numpy")


class _DispatchSpy(TorchDispatchMode):
    def __init__(self, record: Callable[[str], None]) -> None:
        super().__init__()
        self._record = record

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        if name in _SYNC_OPS:
            self._record(name)
        elif name.startswith("aten._to_copy") and args and isinstance(args[0], torch.Tensor):
            device = kwargs.get("device")
            if args[0].device.type != "cpu" and device is not None and torch.device(device).type == "cpu":
                self._record("aten._to_copy(device->cpu)")
        return func(*args, **kwargs)


class HostSyncSpy:
    """Counts host synchronisations during model calls.

    A dispatch mode sees ``_local_scalar_dense`` (``.item()``, ``bool()``/``int()``/``float()`` of a tensor),
    ``nonzero`` and device-to-CPU copies; wrappers on ``Tensor.item/.tolist/.cpu/.numpy`` also catch the calls that are
    no-ops on a CPU tensor, so a CPU run sees what a CUDA run would (runtime_and_environment_facts.md).
    """

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self._where = ""
        self._depth = 0

    def _record(self, what: str) -> None:
        if self._depth == 1:
            self.events.append((self._where, what))

    @contextlib.contextmanager
    def watch(self, where: str) -> Iterator[None]:
        originals = {name: getattr(torch.Tensor, name) for name in _SYNC_METHODS}
        spy = self

        def wrap(name: str, original: Callable) -> Callable:
            def method(self_tensor, *args, **kwargs):
                spy._record(f"Tensor.{name}()")
                spy._depth += 1
                try:
                    return original(self_tensor, *args, **kwargs)
                finally:
                    spy._depth -= 1

            return method

        self._where = where
        self._depth = 1
        for name, original in originals.items():
            setattr(torch.Tensor, name, wrap(name, original))
        try:
            with _DispatchSpy(self._record):
                yield
        finally:
            for name, original in originals.items():
                setattr(torch.Tensor, name, original)
            self._depth = 0

    def count(self, where_prefix: str = "") -> int:
        return sum(1 for where, _ in self.events if where.startswith(where_prefix))


_NO_SPY = None


def _watch(spy: HostSyncSpy | None, where: str):
    return spy.watch(where) if spy is not None else contextlib.nullcontext()


# --------------------------------------------------------------------------------------------------------------------
# Output accumulation and consolidation (engine/output_processor.py)
# --------------------------------------------------------------------------------------------------------------------

CONSOLIDATIONS = ("v0.20", "skip-audio")


def _to_cpu(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    return value


class MultimodalAccumulator:
    """``OmniRequestState.add_multimodal_tensor`` + ``_consolidate_multimodal_tensors`` for one request."""

    def __init__(self, modality: str = "audio") -> None:
        self.modality = modality
        self.accumulated: dict[str, Any] | None = None

    def add(self, payload: dict[str, Any]) -> None:
        incoming = {}
        for key, value in payload.items():
            if key == "model_outputs":
                key = self.modality
            incoming[key] = _to_cpu(value)
        if self.accumulated is None:
            self.accumulated = {k: (dict(v) if isinstance(v, dict) else v) for k, v in incoming.items()}
            return
        for key, value in incoming.items():
            existing = self.accumulated.get(key)
            if existing is None:
                self.accumulated[key] = value
            elif isinstance(value, dict) and isinstance(existing, dict):
                for sub_key, sub_value in value.items():
                    existing[sub_key] = self._merge(existing.get(sub_key), sub_value)
            else:
                self.accumulated[key] = self._merge(existing, value)

    @staticmethod
    def _merge(existing: Any, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and isinstance(existing, torch.Tensor):
            return [existing, value]
        if isinstance(value, torch.Tensor) and isinstance(existing, list):
            existing.append(value)
            return existing
        return value

    def consolidate(self, consolidation: str = "v0.20") -> dict[str, Any]:
        if consolidation not in CONSOLIDATIONS:
            raise ValueError(f"unknown consolidation {consolidation!r}; choose from {CONSOLIDATIONS}")
        out: dict[str, Any] = {}
        for key, value in (self.accumulated or {}).items():
            if isinstance(value, dict):
                out[key] = {k: self._cat(v, 0) for k, v in value.items()}
            elif key == self.modality and isinstance(value, list):
                if consolidation == "skip-audio":
                    out[key] = value  # 0.14/0.16: `if k == "audio": continue`
                else:
                    try:
                        out[key] = torch.cat(value, dim=-1)
                    except RuntimeError:
                        out[key] = torch.cat([v.reshape(-1) for v in value], dim=0)
            elif key == "sr" and isinstance(value, list):
                out[key] = value[-1]
            else:
                out[key] = self._cat(value, 0)
        return out

    @staticmethod
    def _cat(value: Any, dim: int) -> Any:
        if isinstance(value, list) and value and isinstance(value[0], torch.Tensor):
            try:
                return torch.cat(value, dim=dim)
            except RuntimeError:
                return value[-1]
        return value


def split_payload(payload: dict[str, Any] | None, num_reqs: int) -> list[dict[str, Any]]:
    """One payload per request: list values must have ``num_reqs`` entries; tensors (and scalars) go to all."""
    out: list[dict[str, Any]] = [{} for _ in range(num_reqs)]
    for key, value in (payload or {}).items():
        if isinstance(value, dict):
            for i, sub in enumerate(split_payload(value, num_reqs)):
                if sub:
                    out[i][key] = sub
        elif isinstance(value, list):
            if len(value) != num_reqs:
                raise ValueError(f"payload key {key!r} has {len(value)} entries for {num_reqs} requests")
            for i, item in enumerate(value):
                out[i][key] = item
        else:
            for item in out:
                item[key] = value
    return out


# --------------------------------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class RequestRecord:
    """One request through the engine: inputs, scheduling events, what streaming and offline consumers receive."""

    text: str
    index: int
    arrival_step: int = 0
    abort_step: int | None = None
    scheduler_id: str = ""
    external_id: str = ""
    prompt_token_ids: list[int] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    num_computed_tokens: int = 0
    output_token_ids: list[int] = field(default_factory=list)
    finished: bool = False
    aborted: bool = False
    finish_step: int | None = None
    first_audio_step: int | None = None
    stream_chunks: list[torch.Tensor] = field(default_factory=list)
    steps_without_model_outputs: int = 0
    stage0: MultimodalAccumulator = field(default_factory=MultimodalAccumulator)
    final: MultimodalAccumulator = field(default_factory=MultimodalAccumulator)
    final_output: dict[str, Any] = field(default_factory=dict)
    stage0_output: dict[str, Any] = field(default_factory=dict)

    @property
    def stream(self) -> torch.Tensor:
        """The audio a streaming consumer received: every delta, copied on arrival, in order."""
        if not self.stream_chunks:
            return torch.zeros(0)
        return torch.cat([c.reshape(-1) for c in self.stream_chunks])

    @property
    def offline(self) -> Any:
        """The ``audio`` value an offline consumer (``engine.generate()``) reads: a tensor, or a list when the
        consolidation skipped the key."""
        return self.final_output.get("audio")

    def is_finished(self) -> bool:
        return self.finished or self.aborted

    def receive_final(self, payload: dict[str, Any], step: int) -> None:
        """A step of the final stage: accumulate (by reference) and give the streaming consumer a copy."""
        if "model_outputs" not in payload:
            self.steps_without_model_outputs += 1
        else:
            delta = payload["model_outputs"]
            if isinstance(delta, torch.Tensor) and delta.numel() and self.first_audio_step is None:
                self.first_audio_step = step
            if isinstance(delta, torch.Tensor):
                self.stream_chunks.append(delta.detach().to("cpu", copy=True).reshape(-1))
        self.final.add(payload)


# --------------------------------------------------------------------------------------------------------------------
# Stage runners
# --------------------------------------------------------------------------------------------------------------------


def _is_omni_output(value: Any) -> bool:
    return hasattr(value, "text_hidden_states") and hasattr(value, "multimodal_outputs")


def _merge_update(info: dict[str, Any], update: dict[str, Any] | None) -> None:
    for key, value in (update or {}).items():
        if isinstance(value, dict) and isinstance(info.get(key), dict):
            info[key].update(value)
        else:
            info[key] = value


def model_device(model: torch.nn.Module) -> torch.device:
    for param in model.parameters():
        return param.device
    return torch.device("cpu")


@dataclass
class StepResult:
    tokens: list[int]
    payloads: list[dict[str, Any]]


class ARStageRunner:
    """One AR stage (``LLM_AR``): executes scheduled steps the way the 0.20 GPU AR runner calls the model."""

    def __init__(self, model: torch.nn.Module, *, request_id_key: str = "request_id", spy: HostSyncSpy | None = None):
        self.model = model
        self.request_id_key = request_id_key
        self.spy = spy

    def finish(self, finished_ids: set[str]) -> None:
        if finished_ids and hasattr(self.model, "on_requests_finished"):
            self.model.on_requests_finished(set(finished_ids))

    def execute(self, batch: list[RequestRecord], finished_ids: set[str]) -> StepResult:
        model, spy = self.model, self.spy
        self.finish(finished_ids)
        if not batch:
            return StepResult([], [])
        device = model_device(model)
        flat: list[int] = []
        positions: list[int] = []
        bounds: list[tuple[int, int]] = []
        for record in batch:
            ids = record.prompt_token_ids if record.num_computed_tokens == 0 else record.output_token_ids[-1:]
            bounds.append((len(flat), len(flat) + len(ids)))
            positions.extend(range(record.num_computed_tokens, record.num_computed_tokens + len(ids)))
            flat.extend(ids)
        input_ids = torch.tensor(flat, dtype=torch.long, device=device)
        position_ids = torch.tensor(positions, dtype=torch.long, device=device)
        infos = [record.info for record in batch]
        inputs_embeds = None
        if getattr(model, "has_preprocess", False):
            embeds = []
            for record, (start, end) in zip(batch, bounds, strict=True):
                record.info[self.request_id_key] = record.scheduler_id
                with _watch(spy, "preprocess"):
                    _, req_embeds, update = model.preprocess(
                        input_ids=input_ids[start:end], input_embeds=None, **record.info
                    )
                _merge_update(record.info, update)
                embeds.append(req_embeds[: end - start])
            inputs_embeds = torch.cat(embeds)
        kwargs = {
            "intermediate_tensors": None,
            "inputs_embeds": inputs_embeds,
            "runtime_additional_information": infos,
            "model_intermediate_buffer": infos,
        }
        with _watch(spy, "forward"):
            output = model.forward(input_ids=input_ids, positions=position_ids, **kwargs)
        if not _is_omni_output(output) and hasattr(model, "make_omni_output"):
            with _watch(spy, "make_omni_output"):
                output = model.make_omni_output(output, **kwargs)
        if _is_omni_output(output):
            hidden, multimodal = output.text_hidden_states, output.multimodal_outputs
        else:
            hidden, multimodal = output, None
        last = torch.tensor([end - 1 for _, end in bounds], dtype=torch.long, device=hidden.device)
        with _watch(spy, "compute_logits"):
            logits = model.compute_logits(hidden[last])
        tokens = logits.argmax(dim=-1).tolist()
        if getattr(model, "has_postprocess", False):
            for record, (start, end) in zip(batch, bounds, strict=True):
                kwargs_pp = {k: v for k, v in record.info.items() if k != "hidden_states"}
                with _watch(spy, "postprocess"):
                    update = model.postprocess(hidden[start:end], multimodal_outputs=multimodal, **kwargs_pp)
                _merge_update(record.info, update)
        for record, (start, end) in zip(batch, bounds, strict=True):
            record.num_computed_tokens += end - start
        return StepResult(tokens, split_payload(multimodal, len(batch)))


class GenerationStageRunner:
    """One generation stage (``LLM_GENERATION``): flat prompt ids of several requests plus ``seq_token_counts``."""

    def __init__(self, model: torch.nn.Module, *, spy: HostSyncSpy | None = None):
        self.model = model
        self.spy = spy

    def execute(self, items: list[tuple[list[int], dict[str, Any]]]) -> list[dict[str, Any]]:
        device = model_device(self.model)
        flat = [token for ids, _ in items for token in ids]
        infos = [info for _, info in items]
        kwargs = {"runtime_additional_information": infos, "model_intermediate_buffer": infos}
        with _watch(self.spy, "generation.forward"):
            output = self.model.forward(
                input_ids=torch.tensor(flat, dtype=torch.long, device=device),
                positions=torch.arange(len(flat), device=device),
                seq_token_counts=[len(ids) for ids, _ in items],
                **kwargs,
            )
        if not _is_omni_output(output) and hasattr(self.model, "make_omni_output"):
            output = self.model.make_omni_output(output, **kwargs)
        return split_payload(output.multimodal_outputs, len(items))


# --------------------------------------------------------------------------------------------------------------------
# Engine loops
# --------------------------------------------------------------------------------------------------------------------


@dataclass
class EngineConfig:
    """Scheduling knobs (from the subject's deploy config)."""

    max_num_seqs: int = 4
    decoder_max_num_seqs: int = 1
    async_chunk: bool = True
    codec_chunk_frames: int = 8
    codec_left_context_frames: int = 8
    max_tokens: int = 512
    consolidation: str = "v0.20"
    request_id_key: str = "request_id"


def make_requests(
    texts: list[str],
    encode: Callable[[str], list[int]],
    *,
    arrival_steps: list[int] | None = None,
    abort_steps: dict[int, int] | None = None,
) -> list[RequestRecord]:
    records = []
    for i, text in enumerate(texts):
        record = RequestRecord(
            text=text,
            index=i,
            arrival_step=(arrival_steps or [0] * len(texts))[i],
            abort_step=(abort_steps or {}).get(i),
            scheduler_id=f"req-{i}-sched",
            external_id=f"req-{i}",
            prompt_token_ids=list(encode(text)),
        )
        record.info = {"text": [text], "global_request_id": [record.external_id]}
        records.append(record)
    return records


def run_ar_engine(
    runner: ARStageRunner,
    records: list[RequestRecord],
    *,
    eos_token_id: int,
    config: EngineConfig,
    on_step: Callable[[RequestRecord, dict[str, Any], int], None] | None = None,
    after_step: Callable[[int], None] | None = None,
    max_steps: int = 10_000,
) -> None:
    """Schedule ``records`` on one AR stage until every request finished or was aborted.

    ``on_step(record, payload, step)`` sees each request's per-step payload (after the request's finish flag is set);
    ``after_step(step)`` runs once per engine step (the two-stage engine steps stage 1 there).
    """
    waiting = deque(sorted(records, key=lambda r: (r.arrival_step, r.index)))
    running: list[RequestRecord] = []
    finished_ids: set[str] = set()
    step = 0
    while (waiting or running or finished_ids) and step < max_steps:
        for record in list(running):
            if record.abort_step is not None and step >= record.abort_step:
                record.aborted = True
                record.finish_step = step
                running.remove(record)
                finished_ids.add(record.scheduler_id)
                if on_step is not None:
                    on_step(record, {}, step)
        while waiting and waiting[0].arrival_step <= step and len(running) < config.max_num_seqs:
            running.append(waiting.popleft())
        batch = list(running)
        result = runner.execute(batch, finished_ids)
        finished_ids = set()
        for record, token, payload in zip(batch, result.tokens, result.payloads, strict=True):
            record.output_token_ids.append(token)
            if token == eos_token_id or len(record.output_token_ids) >= config.max_tokens:
                record.finished = True
                record.finish_step = step
                running.remove(record)
                finished_ids.add(record.scheduler_id)
            if on_step is not None:
                on_step(record, payload, step)
        if after_step is not None:
            after_step(step)
        step += 1
    if waiting or running:
        raise RuntimeError(f"engine did not finish within {max_steps} steps")


def run_single_stage(
    model: torch.nn.Module, records: list[RequestRecord], config: EngineConfig, spy: HostSyncSpy | None = None
) -> list[RequestRecord]:
    """Single-stage models (generator and native AR): stage 0 is the final audio stage."""
    runner = ARStageRunner(model, request_id_key=config.request_id_key, spy=spy)

    def on_step(record: RequestRecord, payload: dict[str, Any], step: int) -> None:
        if payload:
            record.receive_final(payload, step)
        if record.is_finished():
            record.final_output = record.final.consolidate(config.consolidation)

    run_ar_engine(runner, records, eos_token_id=model.config.eos_token_id, config=config, on_step=on_step)
    return records


def run_two_stage(
    talker: torch.nn.Module,
    code2wav: torch.nn.Module,
    processor: Any,
    records: list[RequestRecord],
    config: EngineConfig,
    spy: HostSyncSpy | None = None,
) -> list[RequestRecord]:
    """Talker (AR) -> code2wav (generation), through the pattern's stage input processor."""
    talker_runner = ARStageRunner(talker, request_id_key=config.request_id_key, spy=spy)
    decoder_runner = GenerationStageRunner(code2wav, spy=spy)
    connector = SimpleNamespace(
        config={
            "extra": {
                "codec_chunk_frames": config.codec_chunk_frames,
                "codec_left_context_frames": config.codec_left_context_frames,
            }
        }
    )
    transfer = SimpleNamespace(code_prompt_token_ids=defaultdict(list), connector=connector)
    queue: deque[tuple[RequestRecord, list[int], dict[str, Any], bool]] = deque()

    def on_step(record: RequestRecord, payload: dict[str, Any], step: int) -> None:
        if payload:
            record.stage0.add(payload)
        finished = record.is_finished()
        if finished:
            record.stage0_output = record.stage0.consolidate("v0.20")
        if config.async_chunk:
            request = SimpleNamespace(external_req_id=record.external_id, is_finished=record.is_finished)
            window = processor.talker2code2wav_async_chunk(transfer, payload or None, request, is_finished=finished)
            if window is not None:
                codes = window.get("codes", {}).get("audio") or []
                queue.append((record, list(codes), window, finished))
        elif finished and not record.aborted:
            source = SimpleNamespace(
                finished=True,
                outputs=[SimpleNamespace(multimodal_output=record.stage0_output, token_ids=record.output_token_ids)],
            )
            for prompt in processor.talker2code2wav([source]):
                info = dict(prompt.get("additional_information") or {})
                queue.append((record, list(prompt["prompt_token_ids"]), info, True))

    def decode_step(step: int) -> None:
        while queue:
            batch: list[tuple[RequestRecord, list[int], dict[str, Any], bool]] = []
            seen: set[int] = set()
            for item in list(queue):
                if len(batch) >= config.decoder_max_num_seqs:
                    break
                if item[0].index not in seen:
                    seen.add(item[0].index)
                    batch.append(item)
                    queue.remove(item)
            payloads = decoder_runner.execute([(codes, info) for _, codes, info, _ in batch])
            for (record, _, _, last), payload in zip(batch, payloads, strict=True):
                record.receive_final(payload, step)
                if last:
                    record.final_output = record.final.consolidate(config.consolidation)

    run_ar_engine(
        talker_runner,
        records,
        eos_token_id=talker.config.eos_token_id,
        config=config,
        on_step=on_step,
        after_step=decode_step,
    )
    decode_step(-1)
    return records
