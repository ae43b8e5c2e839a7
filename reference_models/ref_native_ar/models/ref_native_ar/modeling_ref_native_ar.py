# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""RefNativeAr: single stage, a vLLM-native base LM plus side computation attached through hooks.

The runner steps the base LM like any AR model (``forward`` returns hidden states; under vLLM the decoder layers
would use PagedAttention, here each request keeps its own KV cache). Around it:

- ``preprocess`` (per request, before forward): the prompt's token embeddings at prefill, afterwards the feature
  embedding of the latent patch that the previous step produced.
- ``forward``: the base LM over this step's tokens, then the stop head (with a duration prior) on each request's
  last hidden state; ``compute_logits`` turns the stop decisions into EOS / placeholder logits.
- ``postprocess`` (the runner's post-processing hook, per request, after sampling): the side computation on the
  step's last hidden state: flow-matching head (Euler solver) -> latent patch -> VAE decode of the new frames
  with ``decode_pad_frames`` frames of context -> that step's audio delta, kept in the request's state.
- ``make_omni_output`` (called by the runner right after the next forward): drains each request's pending delta
  into ``model_outputs``, the way VoxCPM2 drains its audio queue. A step's audio is therefore emitted one runner
  step after it was computed; the patch computed on the step whose stop head fired is never emitted, exactly as
  the reference never computes it.

Per-request state is keyed by the scheduler request id the runner writes into each info dict before
``preprocess`` (``has_preprocess = True``; the same dict reaches ``postprocess`` and ``make_omni_output``) and is
freed in ``on_requests_finished`` (finish and abort).
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from omnitts.reference_models.contract import OmniOutput

from .configuration_ref_native_ar import (
    RefNativeArConfig,
    init_weights_from_seed,
)
from .ref_native_ar_flow import (
    RefNativeArFeatEncoder,
    RefNativeArFlowHead,
)
from .ref_native_ar_vae import RefNativeArAudioVAEDecoder

logger = logging.getLogger(__name__)

# Keys under which the target release's runner puts the scheduler request id, in lookup order.
_REQUEST_ID_KEYS: tuple[str, ...] = ("request_id",)


def request_key(info: dict[str, Any]) -> str:
    """The scheduler request id of one request's info dict (the id ``on_requests_finished`` receives)."""
    for key in _REQUEST_ID_KEYS:
        value = info.get(key)
        if isinstance(value, list):
            value = value[0] if value else None
        if value is not None:
            return str(value)
    raise KeyError(f"request info has none of the request id keys {_REQUEST_ID_KEYS}; keys present: {sorted(info)}")


class RefNativeArRMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rotary_cos_sin(positions: torch.Tensor, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE tables ``[len(positions), head_dim]`` for integer positions."""
    exponent = torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim
    freqs = positions.to(torch.float32)[:, None] / (theta**exponent)[None, :]
    angles = torch.cat([freqs, freqs], dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos.to(x.dtype) + torch.cat([-x2, x1], dim=-1) * sin.to(x.dtype)


@dataclass
class KVCache:
    """One layer's keys and values of one request, ``[kv_heads, tokens, head_dim]``."""

    key: torch.Tensor | None = None
    value: torch.Tensor | None = None


class RefNativeArAttention(nn.Module):
    """Grouped-query self-attention with RoPE over one request's tokens and its KV cache."""

    def __init__(self, config: RefNativeArConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache) -> torch.Tensor:
        n = x.shape[0]
        q = apply_rotary(self.q_proj(x).view(n, self.num_heads, self.head_dim).transpose(0, 1), cos, sin)
        k = apply_rotary(self.k_proj(x).view(n, self.num_kv_heads, self.head_dim).transpose(0, 1), cos, sin)
        v = self.v_proj(x).view(n, self.num_kv_heads, self.head_dim).transpose(0, 1)
        if cache.key is not None:
            k = torch.cat([cache.key, k], dim=1)
            v = torch.cat([cache.value, v], dim=1)
        cache.key, cache.value = k, v
        groups = self.num_heads // self.num_kv_heads
        total = k.shape[1]
        mask = torch.ones(n, total, dtype=torch.bool, device=x.device).tril(diagonal=total - n)
        out = F.scaled_dot_product_attention(
            q, k.repeat_interleave(groups, dim=0), v.repeat_interleave(groups, dim=0), attn_mask=mask
        )
        return self.o_proj(out.transpose(0, 1).reshape(n, self.num_heads * self.head_dim))


class RefNativeArMLP(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class RefNativeArDecoderLayer(nn.Module):
    def __init__(self, config: RefNativeArConfig) -> None:
        super().__init__()
        self.input_norm = RefNativeArRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = RefNativeArAttention(config)
        self.post_norm = RefNativeArRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = RefNativeArMLP(config.hidden_size, config.intermediate_size)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache) -> torch.Tensor:
        x = x + self.self_attn(self.input_norm(x), cos, sin, cache)
        return x + self.mlp(self.post_norm(x))


class RefNativeArModel(nn.Module):
    """The base LM stepped by the runner: text token embeddings, decoder layers, final norm."""

    def __init__(self, config: RefNativeArConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            [RefNativeArDecoderLayer(config) for _ in range(config.num_hidden_layers)],
        )
        self.norm = RefNativeArRMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, embeds: torch.Tensor, positions: torch.Tensor, caches: list[KVCache]) -> torch.Tensor:
        """Hidden states ``[n, hidden]`` of one request's ``n`` new tokens at ``positions``."""
        cos, sin = rotary_cos_sin(positions, self.config.head_dim, self.config.rope_theta)
        x = embeds
        for layer, cache in zip(self.layers, caches, strict=True):
            x = layer(x, cos, sin, cache)
        return self.norm(x)


@dataclass
class NativeState:
    """What the model keeps for one request between steps."""

    caches: list[KVCache]
    frame_idx: torch.Tensor
    target: torch.Tensor
    next_embed: torch.Tensor | None = None
    decode_pad: torch.Tensor | None = None
    pending_audio: torch.Tensor | None = None
    pending_latent: torch.Tensor | None = None


class RefNativeArForConditionalGeneration(nn.Module):
    """Base LM (runner-stepped) + stop head + side computation in the post-processing hook."""

    have_multimodal_outputs = True
    has_preprocess = True
    has_postprocess = True

    def __init__(
        self,
        *,
        vllm_config: Any = None,
        prefix: str = "",
        config: RefNativeArConfig | None = None,
    ) -> None:
        super().__init__()
        self.config = config if config is not None else vllm_config.model_config.hf_config
        config = self.config
        self.model = RefNativeArModel(config)
        self.stop_head = nn.Linear(config.hidden_size, 2, bias=False)
        self.flow_head = RefNativeArFlowHead(config)
        self.feat_encoder = RefNativeArFeatEncoder(config)
        self.audio_vae = RefNativeArAudioVAEDecoder(config)
        init_weights_from_seed(self, config.seed)
        self.audio_vae.float()
        self._hop_length = config.hop_length
        self._decode_pad_frames = config.decode_pad_frames
        self._states: dict[str, NativeState] = {}
        self._pending: list[tuple[str, torch.Tensor, int]] = []
        self._step_stop: torch.Tensor | None = None

    # ------------------------------------------------------------------ model pieces

    def stop_flags(self, last_hidden: torch.Tensor, frame_idx: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Stop decision per row ``[B]``: stop head plus a duration prior (``+1e9`` from ``max_frames`` on)."""
        config = self.config
        logits = self.stop_head(last_hidden).float()
        prior = torch.where(
            frame_idx >= config.max_frames, 1e9, config.stop_ramp * (frame_idx - target).to(torch.float32)
        )
        return logits[:, 1] + prior > logits[:, 0]

    def decode_delta(self, state: NativeState, patch: torch.Tensor) -> torch.Tensor:
        """Audio of a new patch ``[patch_size, latent_dim]``: VAE-decode it after the pad frames, trim the pad."""
        pad = state.decode_pad
        window = patch if pad is None else torch.cat([pad, patch], dim=0)
        pad_frames = 0 if pad is None else pad.shape[0]
        with torch.autocast(device_type=window.device.type, enabled=False):
            waveform = self.audio_vae(window[None].float())[0]
        state.decode_pad = window[-self._decode_pad_frames :]
        return waveform[pad_frames * self._hop_length :].to(torch.float32)

    def new_state(self, prompt_len: int, device: torch.device) -> NativeState:
        return NativeState(
            caches=[KVCache() for _ in range(self.config.num_hidden_layers)],
            frame_idx=torch.zeros(1, dtype=torch.long, device=device),
            target=torch.full((1,), self.config.frames_per_text_token * prompt_len, dtype=torch.long, device=device),
        )

    # ------------------------------------------------------------------ runner interface

    def embed_input_ids(self, input_ids: torch.Tensor, **_: Any) -> torch.Tensor:
        return self.model.embed_tokens(input_ids)

    def preprocess(
        self, input_ids: torch.Tensor, input_embeds: torch.Tensor | None = None, **info: Any
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Input embeddings of one request: its prompt at prefill, the last patch's feature embedding afterwards."""
        key = request_key(info)
        span = input_ids.shape[0]
        state = self._states.get(key)
        if state is None or span > 1:
            state = self.new_state(span, input_ids.device)
            self._states[key] = state
            embeds = self.model.embed_tokens(input_ids)
        elif state.next_embed is None:
            raise RuntimeError(f"request {key}: no latent patch from the previous step; postprocess() must run")
        else:
            embeds = state.next_embed[None, :]
        self._pending.append((key, embeds, span))
        return input_ids, embeds, {}

    @torch.no_grad()
    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor | None,
        intermediate_tensors: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """The base LM over this step's tokens, in batch order; returns hidden states ``[num_tokens, H]``.

        Audio is not produced here: ``postprocess`` computes each step's delta and ``make_omni_output`` emits it.
        """
        pending, self._pending = self._pending, []
        hidden_size = self.config.hidden_size
        device = self.model.embed_tokens.weight.device
        num_tokens = input_ids.shape[0] if input_ids is not None else sum(span for _, _, span in pending)
        if not pending:  # profiling / dummy run
            self._step_stop = None
            return torch.zeros(num_tokens, hidden_size, device=device)
        if positions is None:
            raise ValueError("the base LM needs the runner's positions")
        rows: list[torch.Tensor] = []
        last: list[torch.Tensor] = []
        offset = 0
        for key, embeds, span in pending:
            hidden = self.model(embeds, positions[offset : offset + span], self._states[key].caches)
            rows.append(hidden)
            last.append(hidden[-1:])
            offset += span
        states = [self._states[key] for key, _, _ in pending]
        self._step_stop = self.stop_flags(
            torch.cat(last),
            torch.cat([state.frame_idx for state in states]),
            torch.cat([state.target for state in states]),
        )
        hidden_states = torch.cat(rows)
        if num_tokens > hidden_states.shape[0]:  # the runner padded the batch
            padding = hidden_states.new_zeros(num_tokens - hidden_states.shape[0], hidden_size)
            hidden_states = torch.cat([hidden_states, padding])
        return hidden_states

    def make_omni_output(self, model_outputs: torch.Tensor | OmniOutput, **kwargs: Any) -> OmniOutput:
        """Emit each request's pending audio delta (computed by the previous step's ``postprocess``).

        Emits delta audio: ``model_outputs[i]`` holds only the samples of the latent patch that request ``i``
        produced since its previous output (empty at prefill), ``sr[i]`` the sample rate and ``latent[i]`` that patch
        ``[patch_size, latent_dim]``. Concatenating a request's deltas gives its whole utterance.
        """
        if isinstance(model_outputs, OmniOutput):
            return model_outputs
        infos = kwargs.get("model_intermediate_buffer")
        if infos is None:
            infos = kwargs.get("runtime_additional_information") or []
        sr = torch.tensor(self.config.sample_rate, dtype=torch.int32)
        empty = torch.zeros((0,), dtype=torch.float32)
        empty_latent = torch.zeros((0, self.config.latent_dim), dtype=torch.float32)
        outputs: list[torch.Tensor] = []
        latents: list[torch.Tensor] = []
        for info in infos:
            state = None if info.get("_is_dummy") else self._states.get(request_key(info))
            audio, latent = empty, empty_latent
            if state is not None and state.pending_audio is not None:
                audio, latent = state.pending_audio, state.pending_latent
                state.pending_audio = state.pending_latent = None
            outputs.append(audio)
            latents.append(latent)
        if not infos:  # dummy run without request dicts
            outputs, latents = [empty], [empty_latent]
        return OmniOutput(
            text_hidden_states=model_outputs,
            multimodal_outputs={"model_outputs": outputs, "sr": [sr] * len(outputs), "latent": latents},
        )

    def compute_logits(self, hidden_states: torch.Tensor | OmniOutput, sampling_metadata: Any = None) -> torch.Tensor:
        """Logits whose argmax is EOS for requests whose stop head fired this step, the placeholder otherwise."""
        if isinstance(hidden_states, OmniOutput):
            hidden_states = hidden_states.text_hidden_states
        rows = hidden_states.shape[0]
        stop = self._step_stop
        if stop is None or stop.shape[0] != rows:  # dummy run: finish every row
            stop = torch.ones(rows, dtype=torch.bool, device=hidden_states.device)
        tokens = torch.where(stop, self.config.eos_token_id, self.config.pad_token_id)
        logits = torch.full((rows, self.config.vocab_size), -1e9, dtype=torch.float32, device=hidden_states.device)
        return logits.scatter_(1, tokens[:, None], 0.0)

    @torch.no_grad()
    def postprocess(self, hidden_states: torch.Tensor, multimodal_outputs: Any = None, **info: Any) -> dict[str, Any]:
        """Side computation of one request's step: flow head -> latent patch -> next input embedding + audio delta.

        Runs on every step, also the one whose stop head fired (its patch is never emitted), so no decision has to
        be read back to the host.
        """
        state = self._states.get(request_key(info))
        if state is None or hidden_states.shape[0] == 0:
            return {}
        patch = self.flow_head.solve(hidden_states[-1:], state.frame_idx)
        state.next_embed = self.feat_encoder(patch)[0]
        state.pending_latent = patch[0].float()
        state.pending_audio = self.decode_delta(state, patch[0])
        state.frame_idx = state.frame_idx + 1
        return {}

    def on_requests_finished(self, finished_req_ids: Iterable[str]) -> None:
        """Free the state of finished and aborted requests (the ids are the scheduler ids the runner injects)."""
        for req_id in finished_req_ids:
            self._states.pop(str(req_id), None)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """The tiny default model draws its weights from ``config.seed``; drain the iterator and report all loaded."""
        for _ in weights:
            pass
        return {name for name, _ in self.named_parameters()}
