"""Tiny private toy models that follow the forward contract (docs/architecture.md), plus broken variants.

They exist so that the harness and the checks can be tested without the reference models. Each toy
is deliberately small (a few hundred parameters, deterministic from ``seed``) and each ``bug`` flag
plants one of the bugs the guide warns about:

``replay``        forward() re-decodes from step 0 every call (cumulative) while declaring delta
``truncate``      the decoder state is reset every step, so only the newest frames are decoded
``shared``        per-request state lives in one shared buffer (crosstalk under concurrency)
``leak``          per-request state is never freed
``global_id``     state keyed by ``global_request_id``, which the finish hook never receives
``sync``          ``.item()`` inside forward (host sync in the hot loop)
``tolist``        ``.tolist()`` inside forward (a sync CPU tensors do not dispatch)
``no_context``    the stage input processor sends chunks without left context
``raise``         forward() raises on the third step
``hang``          forward() spins forever on the third step
``sleep``         forward() blocks in ``time.sleep(1e6)`` on the third step (one blocking call)
``hog``           forward() keeps 8 MB more of memory every step, referenced by no container I5 inspects
``exit``          forward() ends its process (``os._exit``) on the third step: a crash, not a failure
``gil``           forward() blocks on the third step in a C call that holds the GIL (nothing can interrupt it)
``nan``           the decoder's samples are NaN from the second step on (an overflow in the model's own output)
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from omnitts.validators.runtime.subject import RequestPlan, RuntimeSubject, StageSpec

EOS = 0
_HOARD: list[torch.Tensor] = []  # the ``hog`` bug's memory, outside the model (I5 cannot see it)
SR = 16000
HOP = 32
Q = 2
VOCAB = 12


class OmniOutput(NamedTuple):
    text_hidden_states: Any
    multimodal_outputs: dict | None = None
    intermediate_tensors: Any = None
    next_token_id: Any = None


class ToyConfig:
    def __init__(self, seed=0, hidden=16, bug: str | None = None, frames_per_step: int = 1):
        self.seed, self.hidden, self.bug, self.frames_per_step = seed, hidden, bug, frames_per_step
        self.eos_token_id, self.sample_rate, self.hop_length = EOS, SR, HOP


def _text_len(info: dict) -> int:
    text = info.get("text", [""])
    text = text[0] if isinstance(text, list) else text
    return max(1, len(str(text)) // 2)


def _decode(codes_qf: torch.Tensor, prev: torch.Tensor | None = None) -> torch.Tensor:
    """codes [Q, F] -> F*HOP samples; each frame also depends on the previous frame (left context)."""
    q, f = codes_qf.shape
    c = codes_qf.float()
    shifted = torch.cat(
        [torch.zeros(q, 1, device=c.device) if prev is None else prev.float().reshape(q, 1), c[:, :-1]], 1
    )
    base = (c[0] * 0.37 + c[1] * 0.11 + shifted[0] * 0.23 - shifted[1] * 0.05).reshape(f, 1)
    t = torch.arange(HOP, device=c.device, dtype=torch.float32).reshape(1, HOP)
    return torch.sin(base * (t + 1.0) * 0.1).reshape(-1)


class ToyTalker(nn.Module):
    """AR stage: one codec frame (Q codes) per step; EOS once the text's frames are done."""

    def __init__(self, config: ToyConfig | None = None, vllm_config=None, prefix: str = ""):
        super().__init__()
        self.config = config = config or ToyConfig()
        g = torch.Generator().manual_seed(config.seed)
        self.embed = nn.Parameter(torch.randn(VOCAB, config.hidden, generator=g))
        self.pos = nn.Parameter(torch.randn(64, config.hidden, generator=g) * 0.1)
        self.head = nn.Parameter(torch.randn(config.hidden, VOCAB, generator=g))
        self.has_preprocess = True
        self.have_multimodal_outputs = True
        self._remaining: dict[str, int] = {}
        self._shared_remaining = [0]

    def load_weights(self, weights):
        for _ in weights:
            pass
        return set()

    def _key(self, info: dict) -> str:
        if self.config.bug == "global_id":
            return str(info["global_request_id"][0])
        return str(info["request_id"])

    def preprocess(self, input_ids, input_embeds, **info):
        key = self._key(info)
        if key not in self._remaining:
            self._remaining[key] = _text_len(info)
            self._shared_remaining[0] = self._remaining[key]  # "shared" bug: one countdown for everyone
        emb = self.embed[input_ids.clamp(0, VOCAB - 1)]
        return input_ids, emb, {}

    def forward(
        self,
        input_ids,
        positions,
        intermediate_tensors=None,
        inputs_embeds=None,
        runtime_additional_information=None,
        **kwargs,
    ):
        """Delta: each call returns only this step's codec frame per request (under codes.audio)."""
        infos = runtime_additional_information or []
        if self.config.bug == "sync":
            _ = int(positions.max().item())
        if self.config.bug == "tolist":
            _ = positions.tolist()
        hidden = torch.tanh(inputs_embeds + self.pos[positions.clamp(0, 63)])
        # per-request countdown, carried in hidden[:, 0] for compute_logits (no host sync)
        count = torch.zeros(hidden.shape[0], device=hidden.device)
        logits_index = kwargs.get("logits_index")
        rems = []
        for info in infos:
            key = self._key(info) if info else None
            if key is None or key not in self._remaining:
                rems.append(0.0)
                continue
            if self.config.bug == "shared":
                rem = self._shared_remaining[0]
                self._shared_remaining[0] = rem - 1
            else:
                rem = self._remaining[key]
                self._remaining[key] = rem - 1
            rems.append(float(rem))
        if rems and logits_index is not None:
            count = count.index_put((logits_index,), torch.tensor(rems, device=hidden.device))
        hidden = torch.cat([count.reshape(-1, 1), hidden[:, 1:]], dim=1)
        codes = (hidden[:, 1 : 1 + Q].abs() * 97).long() % (VOCAB - 1) + 1
        return OmniOutput(text_hidden_states=hidden, multimodal_outputs={"codes": {"audio": codes}})

    def compute_logits(self, hidden):
        logits = hidden @ self.head
        logits[:, EOS] = torch.where(
            hidden[:, 0] <= 0, torch.full_like(hidden[:, 0], 1e4), torch.full_like(hidden[:, 0], -1e4)
        )
        return logits

    def on_requests_finished(self, finished_req_ids):
        if self.config.bug == "leak":
            return
        for rid in finished_req_ids:
            self._remaining.pop(str(rid), None)


class ToyCode2Wav(nn.Module):
    """Generation stage: decodes a chunk of frames (with left context) to audio; stateless."""

    def __init__(self, config: ToyConfig | None = None, vllm_config=None, prefix: str = ""):
        super().__init__()
        self.config = config or ToyConfig()
        self.have_multimodal_outputs = True
        self.has_preprocess = False
        self.enable_update_additional_information = True
        self._prev: dict[str, torch.Tensor] = {}

    def forward(
        self,
        input_ids,
        positions,
        intermediate_tensors=None,
        inputs_embeds=None,
        runtime_additional_information=None,
        seq_token_counts=None,
        **kwargs,
    ):
        """Delta: decodes only the new frames of each request's chunk (left context is dropped)."""
        infos = runtime_additional_information or []
        counts = seq_token_counts or [input_ids.numel()]
        outs, srs = [], []
        start = 0
        for i, n in enumerate(counts):
            ids = input_ids[start : start + n]
            start += n
            meta = (infos[i] if i < len(infos) else {}).get("meta", {})
            ctx = int(meta.get("left_context_size", 0))
            if n == 0 or n % Q:  # e.g. the scheduler's single pad token of an empty final chunk
                outs.append(torch.zeros(0))
                srs.append(torch.tensor(SR, dtype=torch.int32))
                continue
            frames = n // Q
            wave = _decode(ids.reshape(Q, frames))
            if self.config.bug == "replay":
                ctx = 0
            outs.append(wave[ctx * HOP :])
            srs.append(torch.tensor(SR, dtype=torch.int32))
        return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": outs, "sr": srs})


def talker2code2wav_async_chunk(transfer_manager, pooling_output, request, is_finished=False):
    ext = request.external_req_id
    frames = transfer_manager.code_prompt_token_ids[ext]
    if isinstance(pooling_output, dict):
        codes = pooling_output.get("codes", {}).get("audio")
        stopped = is_finished and request.output_token_ids and request.output_token_ids[-1] == EOS
        if codes is not None and codes.numel() and not stopped:
            frames.append(codes[-1].reshape(-1).tolist())
    cfg = transfer_manager.connector.config.get("extra", {})
    chunk = int(cfg.get("codec_chunk_frames", 4))
    left = int(cfg.get("codec_left_context_frames", 2))
    bug = cfg.get("toy_bug")
    n = len(frames)
    if n == 0:
        return {"codes": {"audio": []}, "meta": {"finished": torch.tensor(True)}} if is_finished else None
    if not is_finished and n % chunk != 0:
        return None
    new = n % chunk if (is_finished and n % chunk) else chunk
    if is_finished and n % chunk == 0 and transfer_manager.request_payload.get(ext) == n:
        return {"codes": {"audio": []}, "meta": {"finished": torch.tensor(True)}}
    if bug == "replay":
        window, ctx = frames, 0
    else:
        ctx = 0 if bug == "no_context" else min(left, n - new)
        window = frames[n - new - ctx :]
    transfer_manager.request_payload[ext] = n
    flat = [window[f][q] for q in range(Q) for f in range(len(window))]
    return {"codes": {"audio": flat}, "meta": {"left_context_size": ctx, "finished": torch.tensor(bool(is_finished))}}


class _Struct:
    """Stand-in for a msgspec struct of ``vllm_omni/data_entry_keys.py`` (0.22+): keyword-only fields listed in
    ``__struct_fields__``, unset ones None (the protocol the harness reads; msgspec is not installed here)."""

    __struct_fields__: tuple[str, ...] = ()

    def __init__(self, **fields):
        unknown = set(fields) - set(self.__struct_fields__)
        if unknown:
            raise TypeError(f"unexpected fields {sorted(unknown)}")
        for name in self.__struct_fields__:
            setattr(self, name, fields.get(name))


class CodesStruct(_Struct):
    __struct_fields__ = ("audio", "ref")


class MetaStruct(_Struct):
    __struct_fields__ = ("finished", "left_context_size")


class OmniPayloadStruct(_Struct):
    __struct_fields__ = ("codes", "meta")


def talker2code2wav_async_chunk_struct(transfer_manager, multimodal_output, request, is_finished=False):
    """The toy processor for 0.22+ adapters (here with 0.24+'s payload keyword): the same window as an
    ``OmniPayloadStruct``, codes as a 1-D long tensor."""
    window = talker2code2wav_async_chunk(transfer_manager, multimodal_output, request, is_finished)
    if window is None:
        return None
    return OmniPayloadStruct(
        codes=CodesStruct(audio=torch.tensor(window["codes"]["audio"], dtype=torch.long)),
        meta=MetaStruct(**window["meta"]),
    )


class ToySingleStage(nn.Module):
    """Single-stage generator: one AR stage that emits one audio chunk per step (delta)."""

    def __init__(self, config: ToyConfig | None = None, vllm_config=None, prefix: str = ""):
        super().__init__()
        self.config = config or ToyConfig()
        self.talker = ToyTalker(self.config)
        self.has_preprocess = True
        self.have_multimodal_outputs = True
        self._codes: dict[str, list[torch.Tensor]] = {}
        self._shared: list[torch.Tensor] = []

    def preprocess(self, input_ids, input_embeds, **info):
        return self.talker.preprocess(input_ids, input_embeds, **info)

    def forward(
        self,
        input_ids,
        positions,
        intermediate_tensors=None,
        inputs_embeds=None,
        runtime_additional_information=None,
        **kwargs,
    ):
        """Delta: returns only the audio of this step's new frame for each request."""
        if self.config.bug == "raise" and int(positions.min()) >= 3:
            raise RuntimeError("toy bug: forward exploded")
        if self.config.bug == "hang" and int(positions.min()) >= 3:
            while True:
                pass
        if self.config.bug == "sleep" and int(positions.min()) >= 3:
            time.sleep(1e6)
        if self.config.bug == "exit" and int(positions.min()) >= 3:
            os._exit(3)
        if self.config.bug == "gil" and int(positions.min()) >= 3:
            ctypes.PyDLL(None).sleep(3600)  # libc sleep() through PyDLL: the GIL stays held while it blocks
        if self.config.bug == "hog":
            _HOARD.append(torch.ones(2 * 1024 * 1024))  # 8 MB per step
        out = self.talker(
            input_ids,
            positions,
            inputs_embeds=inputs_embeds,
            runtime_additional_information=runtime_additional_information,
            **kwargs,
        )
        hidden, codes = out.text_hidden_states, out.multimodal_outputs["codes"]["audio"]
        infos = runtime_additional_information or []
        last_codes = codes.index_select(0, kwargs["logits_index"])
        waves, srs = [], []
        for i, info in enumerate(infos):
            key = self.talker._key(info) if info else f"dummy{i}"
            row = last_codes[i].reshape(Q, 1)
            hist = self._shared if self.config.bug == "shared" else self._codes.setdefault(key, [])
            prev = hist[-1] if hist else None
            if self.config.bug == "truncate":
                prev = None
            hist.append(row)
            if self.config.bug == "replay":
                wave = _decode(torch.cat(hist, dim=1))
            else:
                wave = _decode(row, prev)
            if self.config.bug == "nan" and len(hist) >= 2:
                wave = torch.full_like(wave, float("nan"))
            waves.append(wave)
            srs.append(torch.tensor(SR, dtype=torch.int32))
        return OmniOutput(text_hidden_states=hidden, multimodal_outputs={"model_outputs": waves, "sr": srs})

    def compute_logits(self, hidden):
        return self.talker.compute_logits(hidden)

    def on_requests_finished(self, finished_req_ids):
        if self.config.bug == "leak":
            return
        self.talker.on_requests_finished(finished_req_ids)
        for rid in finished_req_ids:
            self._codes.pop(str(rid), None)


TEXTS = ["hi", "hello there", "a slightly longer sentence", "medium text here", "x" * 9]


def plans(n: int = 4, max_tokens: int = 40) -> list[RequestPlan]:
    return [
        RequestPlan(
            ext_id=f"req-{i}",
            prompt_token_ids=[3] * (2 + i % 3),
            additional_information={"text": [TEXTS[i % len(TEXTS)]]},
            max_tokens=max_tokens,
        )
        for i in range(n)
    ]


def _reference_two(plan: RequestPlan) -> torch.Tensor:
    return _reference(plan, eos_frame=False)


def _reference_single(plan: RequestPlan) -> torch.Tensor:
    return _reference(plan, eos_frame=True)


def _reference(plan: RequestPlan, eos_frame: bool) -> torch.Tensor:
    """HF-style reference: the whole utterance decoded in one pass from greedy tokens."""
    m = ToyTalker(ToyConfig())
    frames = []
    info = dict(plan.additional_information, request_id="ref", global_request_id=["ref"])
    with torch.inference_mode():
        ids = torch.tensor(plan.prompt_token_ids)
        _, emb, _ = m.preprocess(ids, None, **info)
        pos = torch.arange(len(ids))
        while True:
            out = m(
                ids,
                pos,
                inputs_embeds=emb,
                runtime_additional_information=[info],
                logits_index=torch.tensor([len(ids) - 1]),
            )
            hidden = out.text_hidden_states
            tok = int(m.compute_logits(hidden[-1:]).argmax(-1))
            if tok == EOS or len(frames) + 1 >= plan.max_tokens:
                if tok != EOS or eos_frame:
                    frames.append(out.multimodal_outputs["codes"]["audio"][-1])
                break
            frames.append(out.multimodal_outputs["codes"]["audio"][-1])
            n = int(pos[-1]) + 1
            ids = torch.tensor([tok])
            _, emb, _ = m.preprocess(ids, None, **info)
            pos = torch.tensor([n])
    if not frames:
        return torch.zeros(0)
    return _decode(torch.stack(frames, dim=1))


def two_stage(bug: str | None = None, release: str = "0.20.0") -> RuntimeSubject:
    cfg = ToyConfig(bug=bug)
    extra = {"codec_chunk_frames": 4, "codec_left_context_frames": 2}
    if bug in ("no_context",):
        extra["toy_bug"] = bug
    return RuntimeSubject(
        name=f"toy_two_stage{'_' + bug if bug else ''}",
        pattern="two-stage",
        release=release,
        stages=[
            StageSpec(
                0,
                "toy",
                "ar",
                lambda: ToyTalker(cfg),
                engine_output_type="latent",
                final_output=False,
                cls=ToyTalker,
                config=cfg,
            ),
            StageSpec(1, "toy_code2wav", "generation", lambda: ToyCode2Wav(cfg), cls=ToyCode2Wav, config=cfg),
        ],
        prompts=plans(),
        sample_rate=SR,
        hop_length=HOP,
        eos_token_id=EOS,
        async_chunk_fn=talker2code2wav_async_chunk,
        connector_extra=extra,
        reference=_reference_two,
        consumer=lambda a: (
            torch.cat([torch.as_tensor(x).reshape(-1) for x in a])
            if isinstance(a, list)
            else torch.as_tensor(a).reshape(-1)
        ),
        consumer_origin="toys.consumer",
        source_files=[Path(__file__)],
        model_files=[Path(__file__)],
        kind="mutant" if bug else "reference",
    )


def single_stage(bug: str | None = None, release: str = "0.20.0") -> RuntimeSubject:
    cfg = ToyConfig(bug=bug)
    return RuntimeSubject(
        name=f"toy_single_stage{'_' + bug if bug else ''}",
        pattern="single-stage",
        release=release,
        stages=[StageSpec(0, "toy_single", "ar", lambda: ToySingleStage(cfg), cls=ToySingleStage, config=cfg)],
        prompts=plans(),
        sample_rate=SR,
        hop_length=HOP,
        eos_token_id=EOS,
        reference=_reference_single,
        consumer=lambda a: (
            torch.cat([torch.as_tensor(x).reshape(-1) for x in a])
            if isinstance(a, list)
            else torch.as_tensor(a).reshape(-1)
        ),
        consumer_origin="toys.consumer",
        source_files=[Path(__file__)],
        model_files=[Path(__file__)],
        kind="mutant" if bug else "reference",
        eos_step_emits_audio=True,
    )
