{{ cookiecutter.license_header }}
"""Configuration of {{ cookiecutter.camel }}: one AR worker runs the LM and the codec (generator pattern).

Token layout of the LM vocabulary:

- ``[0, text_vocab_size)``: text tokens; ids below ``num_special_tokens`` are special: ``eos_token_id`` (listed in
  the pipeline's ``stop_token_ids``; ``compute_logits`` makes it the argmax once a request's last audio chunk went
  out), ``pad_token_id`` (the placeholder token of the other steps) and ``audio_start_token_id``.
- ``audio_token_offset + k * codebook_size + c``: code ``c`` of codebook ``k`` (offset token mapping); the frame
  heads have one extra class on codebook 0, the codec stop.

The defaults describe a tiny model whose weights are drawn from ``seed`` at construction, so the integration runs
as generated; a real model sets these fields from its ``config.json``. ``stream_chunk_frames`` frames are generated
and decoded per forward step, with ``stream_left_context_frames`` frames of decoder context.
"""

import math

import torch
from torch import nn
from transformers import PretrainedConfig


class {{ cookiecutter.camel }}Config(PretrainedConfig):
    """Config of the single stage (``model_type`` selects the pipeline)."""

    model_type = "{{ cookiecutter.model_type }}"

    def __init__(
        self,
        text_vocab_size: int = 64,
        num_special_tokens: int = 4,
        hidden_size: int = 64,
        intermediate_size: int = 128,
        num_hidden_layers: int = 2,
        num_attention_heads: int = 4,
        num_key_value_heads: int = 2,
        rope_theta: float = 10000.0,
        rms_norm_eps: float = 1e-6,
        num_code_groups: int = 4,
        codebook_size: int = 64,
        frames_per_text_token: int = 2,
        stop_ramp: float = 4.0,
        max_frames: int = 96,
        codec_dim: int = 32,
        upsample_rates: tuple[int, ...] | list[int] = (4, 8, 10),
        upsample_channels: tuple[int, ...] | list[int] = (16, 8, 4),
        sample_rate: int = {{ cookiecutter.sample_rate }},
        stream_chunk_frames: int = 4,
        stream_left_context_frames: int = 4,
        seed: int = 0,
        eos_token_id: int = {{ cookiecutter.eos_token_id }},
        **kwargs,
    ) -> None:
        self.text_vocab_size = text_vocab_size
        self.num_special_tokens = num_special_tokens
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = hidden_size // num_attention_heads
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.num_code_groups = num_code_groups
        self.codebook_size = codebook_size
        self.frames_per_text_token = frames_per_text_token
        self.stop_ramp = stop_ramp
        self.max_frames = max_frames
        self.codec_dim = codec_dim
        self.upsample_rates = list(upsample_rates)
        self.upsample_channels = list(upsample_channels)
        self.sample_rate = sample_rate
        self.stream_chunk_frames = stream_chunk_frames
        self.stream_left_context_frames = stream_left_context_frames
        self.seed = seed
        free_ids = [i for i in range(num_special_tokens) if i != eos_token_id]
        pad_token_id, self.audio_start_token_id = free_ids[:2]
        self.audio_token_offset = text_vocab_size
        self.vocab_size = text_vocab_size + num_code_groups * codebook_size
        kwargs.pop("pad_token_id", None)
        super().__init__(**kwargs)
        self.eos_token_id = eos_token_id
        self.pad_token_id = pad_token_id

    @property
    def hop_length(self) -> int:
        """Waveform samples per codec frame: the product of the decoder's upsampling rates."""
        return math.prod(self.upsample_rates)

    def encode_text(self, text: str) -> list[int]:
        """Prompt token ids for ``text``: byte-level text tokens followed by the audio start token."""
        span = self.text_vocab_size - self.num_special_tokens
        return [self.num_special_tokens + b % span for b in text.encode("utf-8")] + [self.audio_start_token_id]


{% from "init_weights.py.j2" import init_weights_from_seed with context %}{{ init_weights_from_seed() }}
