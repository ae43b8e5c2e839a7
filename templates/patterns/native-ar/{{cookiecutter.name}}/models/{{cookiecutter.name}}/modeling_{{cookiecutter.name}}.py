{{ cookiecutter.license_header }}
"""{{ cookiecutter.camel }}: single stage, a vLLM-native base LM plus side computation attached through hooks.

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

{% if cookiecutter.target == "standalone" %}{{ cookiecutter.logger_import }}
{% endif %}from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
{% if cookiecutter.target != "standalone" %}{{ cookiecutter.logger_import }}
{% endif %}
{{ cookiecutter.omni_output_import }}

{% set n = cookiecutter.name %}{% set c = cookiecutter.camel %}{% set entries = [(n ~ "_flow", "(\n    " ~ c ~ "FeatEncoder,\n    " ~ c ~ "FlowHead,\n)"), (n ~ "_vae", c ~ "AudioVAEDecoder"), ("configuration_" ~ n, "(\n    " ~ c ~ "Config,\n    init_weights_from_seed,\n)")] %}{% for module, names in entries | sort %}from .{{ module }} import {{ names }}
{% endfor %}
{{ cookiecutter.logger_init }}

{% from "decoder_lm.py.j2" import decoder_lm with context %}{{ decoder_lm("Model", "The base LM stepped by the runner: text token embeddings, decoder layers, final norm.") }}


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


class {{ cookiecutter.camel }}ForConditionalGeneration(nn.Module):
    """Base LM (runner-stepped) + stop head + side computation in the post-processing hook."""

    have_multimodal_outputs = True
    has_preprocess = True
    has_postprocess = True

    def __init__(
        self,
        *,
        vllm_config: Any = None,
        prefix: str = "",
        config: {{ cookiecutter.camel }}Config | None = None,
    ) -> None:
        super().__init__()
        self.config = config if config is not None else vllm_config.model_config.hf_config
        config = self.config
        self.model = {{ cookiecutter.camel }}Model(config)
        self.stop_head = nn.Linear(config.hidden_size, 2, bias=False)
        self.flow_head = {{ cookiecutter.camel }}FlowHead(config)
        self.feat_encoder = {{ cookiecutter.camel }}FeatEncoder(config)
        self.audio_vae = {{ cookiecutter.camel }}AudioVAEDecoder(config)
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
