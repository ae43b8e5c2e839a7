{{ cookiecutter.license_header }}
"""{{ cookiecutter.camel }}: single-stage TTS, the whole model inside one AR worker (generator pattern).

The LM (RoPE, RMSNorm, grouped-query attention) predicts one frame of K codec codes per AR step and the causal
codec decoder turns frames into audio, both inside ``{{ cookiecutter.camel }}ForGeneration``. Each request owns an
``inference_stream()`` generator, created on its first forward and stored in ``_stream_gens`` under the scheduler
request id that the runner writes into the request's info dict before ``preprocess()`` (``has_preprocess =
True``). Every forward advances each scheduled request's generator by one chunk of ``stream_chunk_frames`` frames
and returns that chunk's audio; ``compute_logits`` emits EOS for a request only after its last chunk.
``on_requests_finished`` closes and drops the generators of finished and aborted requests.
"""

{% if cookiecutter.target == "standalone" %}{{ cookiecutter.logger_import }}
{% endif %}from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
{% if cookiecutter.target != "standalone" %}{{ cookiecutter.logger_import }}
{% endif %}
{{ cookiecutter.omni_output_import }}

from .configuration_{{ cookiecutter.name }} import (
    {{ cookiecutter.camel }}Config,
    init_weights_from_seed,
)

{{ cookiecutter.logger_init }}

{% from "decoder_lm.py.j2" import decoder_lm with context %}{{ decoder_lm("LanguageModel", "The LM: token embeddings (text and offset-mapped codec tokens), decoder layers, final norm.") }}


class {{ cookiecutter.camel }}CausalConv1d(nn.Conv1d):
    """A 1-D convolution padded on the left only, so output ``t`` never sees input after ``t``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, ((self.kernel_size[0] - 1) * self.dilation[0], 0)))


class {{ cookiecutter.camel }}CodecDecoder(nn.Module):
    """Codes ``[B, K, T]`` -> waveform ``[B, T * hop_length]``."""

    def __init__(self, config: {{ cookiecutter.camel }}Config) -> None:
        super().__init__()
        self.codebooks = nn.ModuleList(
            nn.Embedding(config.codebook_size, config.codec_dim) for _ in range(config.num_code_groups)
        )
        self.pre = {{ cookiecutter.camel }}CausalConv1d(config.codec_dim, config.codec_dim, 3)
        self.rates = list(config.upsample_rates)
        channels = [config.codec_dim, *config.upsample_channels]
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(channels[i], channels[i + 1], 2 * rate, stride=rate) for i, rate in enumerate(self.rates)
        )
        self.post = {{ cookiecutter.camel }}CausalConv1d(channels[-1], 1, 7)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        x = sum(embedding(codes[:, k]) for k, embedding in enumerate(self.codebooks)).transpose(1, 2)
        x = F.silu(self.pre(x))
        for up, rate in zip(self.ups, self.rates, strict=True):
            frames = x.shape[-1]
            x = F.silu(up(x)[..., : frames * rate])  # drop the overlap tail: causal transposed convolution
        return torch.tanh(0.5 * self.post(x)).squeeze(1)


def _probe_audio_io() -> bool:
    """``soundfile`` is optional (it only writes debug WAVs): probe it when weights load, never at import time."""
    try:
        import soundfile  # noqa: F401
    except Exception as exc:  # a broken install can raise more than ImportError
        logger.warning("soundfile unavailable (%s: %s); debug WAV dumps disabled", type(exc).__name__, exc)
        return False
    return True


@dataclass
class StreamState:
    """One request's generation state, owned by its generator (and dropped with it)."""

    caches: list[KVCache]
    hidden: torch.Tensor
    position: int
    target_frames: int
    frame_idx: int = 0
    codes: torch.Tensor | None = None
    emitted_frames: int = 0
    last_frames: torch.Tensor | None = None
    finished: bool = field(default=False)


class {{ cookiecutter.camel }}ForGeneration(nn.Module):
    """The single stage: LM + codec, streaming one audio chunk per forward per request."""

    have_multimodal_outputs = True
    has_preprocess = True
    has_postprocess = False

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
        codebook = config.codebook_size
        self.lm = {{ cookiecutter.camel }}LanguageModel(config)
        self.heads = nn.ModuleList(
            nn.Linear(config.hidden_size, codebook + 1, bias=False) for _ in range(config.num_code_groups)
        )
        self.codec = {{ cookiecutter.camel }}CodecDecoder(config)
        init_weights_from_seed(self, config.seed)
        self.codec.float()
        head_bias = torch.zeros(config.num_code_groups, codebook + 1)
        head_bias[1:, codebook] = float("-inf")
        self.register_buffer("head_bias", head_bias, persistent=False)
        stop_onehot = torch.zeros(codebook + 1)
        stop_onehot[codebook] = 1.0
        self.register_buffer("stop_onehot", stop_onehot, persistent=False)
        offsets = config.audio_token_offset + codebook * torch.arange(config.num_code_groups)
        self.register_buffer("code_offsets", offsets, persistent=False)
        eos_logits = torch.full((config.vocab_size,), -1e9)
        eos_logits[config.eos_token_id] = 0.0
        self.register_buffer("eos_logits", eos_logits, persistent=False)
        continue_logits = torch.full((config.vocab_size,), -1e9)
        continue_logits[config.pad_token_id] = 0.0
        self.register_buffer("continue_logits", continue_logits, persistent=False)
        self._hop_length = config.hop_length
        self._left_context_frames = config.stream_left_context_frames
        self._stream_gens: dict[str, tuple[StreamState, Iterator[tuple[torch.Tensor, bool]]]] = {}
        self._pending: list[tuple[str, int]] = []
        self._last_chunk_flags: list[bool] = []
        self._can_dump_wav = False

    # ------------------------------------------------------------------ the model itself

    def frame_embedding(self, codes: torch.Tensor) -> torch.Tensor:
        """Next-step input of a frame: the sum of its K offset-mapped code token embeddings, ``[hidden]``."""
        return self.lm.embed_tokens(self.code_offsets + codes.clamp(max=self.config.codebook_size - 1)).sum(dim=0)

    def predict_frame(
        self,
        hidden: torch.Tensor,
        frame_idx: int,
        target_frames: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy codes ``[K]`` of the next frame and whether it is the codec stop (a 0-d bool tensor).

        The stop class gets a duration prior ``stop_ramp * (frame_idx - target_frames)``, ``+1e9`` from
        ``max_frames`` on; both are Python numbers, so nothing here waits for the device.
        """
        config = self.config
        logits = torch.stack([head(hidden) for head in self.heads]).float() + self.head_bias
        if frame_idx >= config.max_frames:
            stop_bias = 1e9
        else:
            stop_bias = config.stop_ramp * (frame_idx - target_frames)
        logits[0] = logits[0] + stop_bias * self.stop_onehot
        codes = logits.argmax(dim=-1)
        return codes, codes[0] == config.codebook_size

    def start_stream(self, prompt_ids: torch.Tensor) -> StreamState:
        """Prefill the LM on one request's prompt."""
        config = self.config
        caches = [KVCache() for _ in range(config.num_hidden_layers)]
        positions = torch.arange(prompt_ids.shape[0], device=prompt_ids.device)
        hidden = self.lm(self.lm.embed_tokens(prompt_ids), positions, caches)[-1]
        return StreamState(
            caches=caches,
            hidden=hidden,
            position=prompt_ids.shape[0],
            target_frames=config.frames_per_text_token * prompt_ids.shape[0],
            codes=torch.zeros(config.num_code_groups, 0, dtype=torch.long, device=prompt_ids.device),
        )

    def generate_chunk(self, state: StreamState) -> tuple[torch.Tensor, bool]:
        """Run up to ``stream_chunk_frames`` AR frames; returns the new frames ``[K, n]`` and whether it stopped.

        The frame loop only queues device work; the one host read per chunk is the stop flags after the loop.
        """
        config = self.config
        chunk = config.stream_chunk_frames
        device = state.hidden.device
        codes = torch.zeros(config.num_code_groups, chunk, dtype=torch.long, device=device)
        stopped = torch.zeros(chunk, dtype=torch.bool, device=device)
        done = torch.zeros((), dtype=torch.bool, device=device)
        for f in range(chunk):
            frame, stop = self.predict_frame(state.hidden, state.frame_idx, state.target_frames)
            done = done | stop
            codes[:, f] = frame
            stopped[f] = done
            position = torch.arange(state.position, state.position + 1, device=device)
            state.hidden = self.lm(self.frame_embedding(frame)[None, :], position, state.caches)[-1]
            state.frame_idx += 1
            state.position += 1
        # omnitts: ignore[OMNI-I3-002] the one read per chunk, after the frame loop: where did the stream stop?
        flags = stopped.tolist()
        count = flags.index(True) if True in flags else chunk
        return codes[:, :count], count < chunk

    def decode_delta(self, codes: torch.Tensor, emitted_frames: int) -> torch.Tensor:
        """Audio of the frames after ``emitted_frames``: decode them with left context, trim the context."""
        start = max(0, emitted_frames - self._left_context_frames)
        waveform = self.codec(codes[None, :, start:])[0]
        return waveform[(emitted_frames - start) * self._hop_length :].to(torch.float32)

    def inference_stream(self, state: StreamState) -> Iterator[tuple[torch.Tensor, bool]]:
        """Yield ``(delta_waveform, is_last)``: one chunk of ``stream_chunk_frames`` frames per item."""
        while True:
            new_frames, finished = self.generate_chunk(state)
            state.codes = torch.cat([state.codes, new_frames], dim=1)
            state.last_frames = new_frames.T
            with torch.autocast(device_type=state.codes.device.type, enabled=False):
                delta = self.decode_delta(state.codes, state.emitted_frames)
            state.emitted_frames = state.codes.shape[1]
            state.finished = finished
            yield delta, finished
            if finished:
                return

    # ------------------------------------------------------------------ runner interface

    def embed_input_ids(self, input_ids: torch.Tensor, **_: Any) -> torch.Tensor:
        return self.lm.embed_tokens(input_ids)

    def preprocess(
        self, input_ids: torch.Tensor, input_embeds: torch.Tensor | None = None, **info: Any
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Record which request this span belongs to; the LM runs inside the request's generator."""
        self._pending.append((request_key(info), input_ids.shape[0]))
        return input_ids, self.lm.embed_tokens(input_ids), {}

    @torch.no_grad()
    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor | None,
        intermediate_tensors: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        runtime_additional_information: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> OmniOutput:
        """Advance every scheduled request's generator by one chunk.

        Emits delta audio: ``model_outputs[i]`` holds only the waveform of the frames request ``i`` generated in
        this step (decoded with ``stream_left_context_frames`` frames of context that are trimmed), ``sr[i]`` the
        sample rate, and ``codes.audio[i]`` the step's frames ``[n, K]``. Concatenating a request's deltas gives
        its whole utterance.
        """
        pending, self._pending = self._pending, []
        infos = runtime_additional_information or []
        config = self.config
        device = self.lm.embed_tokens.weight.device
        sr = torch.tensor(config.sample_rate, dtype=torch.int32)
        empty = torch.zeros((0,), dtype=torch.float32)
        empty_codes = torch.zeros((0, config.num_code_groups), dtype=torch.long)
        num_tokens = input_ids.shape[0] if input_ids is not None else sum(span for _, span in pending)
        hidden = torch.zeros(num_tokens, config.hidden_size, device=device)
        if not pending or input_ids is None:  # profiling / dummy run
            rows = max(1, len(infos))
            self._last_chunk_flags = [True] * rows
            return OmniOutput(
                text_hidden_states=hidden,
                multimodal_outputs={
                    "model_outputs": [empty] * rows,
                    "sr": [sr] * rows,
                    "codes": {"audio": [empty_codes] * rows},
                },
            )
        outputs: list[torch.Tensor] = []
        frames: list[torch.Tensor] = []
        flags: list[bool] = []
        offset = 0
        for key, span in pending:
            prompt = input_ids[offset : offset + span]
            offset += span
            stream = self._stream_gens.get(key)
            if stream is None:
                state = self.start_stream(prompt)
                stream = self._stream_gens[key] = (state, self.inference_stream(state))
            state, generator = stream
            try:
                chunk, is_last = next(generator)
            except StopIteration:
                chunk, is_last = empty, True
            if is_last:
                self._stream_gens.pop(key, None)
            outputs.append(chunk)
            frames.append(state.last_frames if state.last_frames is not None else empty_codes)
            flags.append(is_last)
        self._last_chunk_flags = flags
        return OmniOutput(
            text_hidden_states=hidden,
            multimodal_outputs={"model_outputs": outputs, "sr": [sr] * len(outputs), "codes": {"audio": frames}},
        )

    def compute_logits(self, hidden_states: torch.Tensor | OmniOutput, sampling_metadata: Any = None) -> torch.Tensor:
        """EOS for the rows whose last chunk went out this step, the placeholder token for the others."""
        if isinstance(hidden_states, OmniOutput):
            hidden_states = hidden_states.text_hidden_states
        rows = hidden_states.shape[0]
        flags = self._last_chunk_flags if len(self._last_chunk_flags) == rows else [True] * rows
        return torch.stack([self.eos_logits if last else self.continue_logits for last in flags])

    def on_requests_finished(self, finished_req_ids: Iterable[str]) -> None:
        """Close and drop the generators of finished and aborted requests (ids are the scheduler ids)."""
        for req_id in finished_req_ids:
            stream = self._stream_gens.pop(str(req_id), None)
            if stream is not None:
                stream[1].close()

    def dump_wav(self, path: str, waveform: torch.Tensor) -> None:
        """Debug helper: write a waveform as WAV (needs the optional ``soundfile``)."""
        import soundfile as sf

        sf.write(path, waveform.detach().float().cpu().numpy(), self.config.sample_rate)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Probe optional dependencies first; the tiny default model draws its weights from ``config.seed``."""
        self._can_dump_wav = _probe_audio_io()
        for _ in weights:
            pass
        return {name for name, _ in self.named_parameters()}
