# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Stage 1 of RefTwoStage: the codec decoder (K codebooks of codes -> waveform), always in float32.

The decoder is causal: a summed codebook embedding, a causal convolution, transposed convolutions whose strides
multiply to the hop length (each trimmed to stay causal), and a causal output convolution. A window that starts
``codec_left_context_frames`` frames early therefore decodes its new frames exactly like decoding the whole
utterance at once, which is what async-chunk streaming relies on.
"""

import logging
from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from omnitts.reference_models.contract import OmniOutput

from .configuration_ref_two_stage import (
    RefTwoStageConfig,
    init_weights_from_seed,
)

logger = logging.getLogger(__name__)


class RefTwoStageCausalConv1d(nn.Conv1d):
    """A 1-D convolution padded on the left only, so output ``t`` never sees input after ``t``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, ((self.kernel_size[0] - 1) * self.dilation[0], 0)))


class RefTwoStageCodecDecoder(nn.Module):
    """Codes ``[B, K, T]`` -> waveform ``[B, T * hop_length]``."""

    def __init__(self, config: RefTwoStageConfig) -> None:
        super().__init__()
        self.codebooks = nn.ModuleList(
            nn.Embedding(config.codebook_size, config.codec_dim) for _ in range(config.num_code_groups)
        )
        self.pre = RefTwoStageCausalConv1d(config.codec_dim, config.codec_dim, 3)
        self.rates = list(config.upsample_rates)
        channels = [config.codec_dim, *config.upsample_channels]
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(channels[i], channels[i + 1], 2 * rate, stride=rate) for i, rate in enumerate(self.rates)
        )
        self.post = RefTwoStageCausalConv1d(channels[-1], 1, 7)

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        x = sum(embedding(codes[:, k]) for k, embedding in enumerate(self.codebooks)).transpose(1, 2)
        x = F.silu(self.pre(x))
        for up, rate in zip(self.ups, self.rates, strict=True):
            frames = x.shape[-1]
            x = F.silu(up(x)[..., : frames * rate])  # drop the overlap tail: causal transposed convolution
        return torch.tanh(0.5 * self.post(x)).squeeze(1)


class RefTwoStageCode2Wav(nn.Module):
    """Stage 1 (generation): decodes each request's window of codec frames into that window's new audio."""

    input_modalities = "audio"
    have_multimodal_outputs = True
    has_preprocess = False
    has_postprocess = False
    enable_update_additional_information = True

    def __init__(
        self,
        *,
        vllm_config: Any = None,
        prefix: str = "",
        config: RefTwoStageConfig | None = None,
    ) -> None:
        super().__init__()
        self.config = config if config is not None else vllm_config.model_config.hf_config
        self.decoder = RefTwoStageCodecDecoder(self.config)
        init_weights_from_seed(self.decoder, self.config.seed + 1)
        self.decoder.float()
        self._num_quantizers = self.config.num_code_groups
        self._hop_length = self.config.hop_length
        self._sample_rate = self.config.sample_rate

    def embed_input_ids(self, input_ids: torch.Tensor, **_: Any) -> torch.Tensor:
        return torch.zeros((input_ids.shape[0], 1), device=input_ids.device, dtype=torch.float32)

    def compute_logits(self, hidden_states: Any, sampling_metadata: Any = None) -> None:
        return None

    def get_dummy_runtime_additional_information(self, num_reqs: int) -> list[dict[str, Any]]:
        return [{"_is_dummy": True, "meta": {"left_context_size": 0}} for _ in range(num_reqs)]

    @staticmethod
    def _left_context(info: dict[str, Any]) -> int:
        value = (info.get("meta") or {}).get("left_context_size", 0)
        if isinstance(value, torch.Tensor):
            value = value.reshape(-1).tolist()
        if isinstance(value, list):
            value = value[0] if value else 0
        return int(value)

    @staticmethod
    def _split(
        input_ids: torch.Tensor | None, seq_token_counts: list[int] | None, infos: list[dict[str, Any]]
    ) -> list[torch.Tensor]:
        """Per-request segments of the flat input ids (the runner's ``seq_token_counts``, else the payload sizes)."""
        if input_ids is None:
            return []
        ids = input_ids.reshape(-1)
        if seq_token_counts is None and len(infos) > 1:
            seq_token_counts = [len((info.get("codes") or {}).get("audio") or []) for info in infos]
        if seq_token_counts is None:
            return [ids]
        bounds = [0]
        for count in seq_token_counts:
            bounds.append(bounds[-1] + int(count))
        return [ids[bounds[i] : bounds[i + 1]] for i in range(len(seq_token_counts))]

    @torch.no_grad()
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        intermediate_tensors: Any = None,
        inputs_embeds: torch.Tensor | None = None,
        runtime_additional_information: list[dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> OmniOutput:
        """Decode each request's window of frames.

        ``input_ids`` of one request is its window, codebook-major (``[K * F]``); ``meta.left_context_size`` in its
        info dict says how many leading frames are context already emitted by an earlier chunk.

        Emits delta audio: ``model_outputs[i]`` holds only the samples of the window's new frames; the
        ``left_context_size * hop_length`` samples of the context are decoded for continuity and trimmed, so the
        concatenated chunks of a request equal decoding all of its codes at once.
        """
        infos = runtime_additional_information or []
        sr = torch.tensor(self._sample_rate, dtype=torch.int32)
        empty = torch.zeros((0,), dtype=torch.float32)
        segments = self._split(input_ids, kwargs.get("seq_token_counts"), infos)
        num_req = max(len(segments), len(infos), 1)
        windows: list[tuple[int, torch.Tensor, int]] = []
        for i, segment in enumerate(segments):
            info = infos[i] if i < len(infos) else {}
            if info.get("_is_dummy") or segment.numel() == 0 or segment.numel() % self._num_quantizers:
                continue
            frames = segment.numel() // self._num_quantizers
            windows.append((i, segment.reshape(self._num_quantizers, frames), self._left_context(info)))
        if not windows:
            return OmniOutput(
                text_hidden_states=None,
                multimodal_outputs={"model_outputs": [empty] * num_req, "sr": [sr] * num_req},
            )
        device = self.decoder.pre.weight.device
        audios = [empty] * num_req
        for i, codes, left_context in windows:
            codes = codes.to(device=device, dtype=torch.long)
            with torch.autocast(device_type=device.type, enabled=False):
                wav = self.decoder(codes[None])[0]
            audios[i] = wav[left_context * self._hop_length :].to(torch.float32)
        return OmniOutput(text_hidden_states=None, multimodal_outputs={"model_outputs": audios, "sr": [sr] * num_req})

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """The tiny default codec draws its weights from ``config.seed + 1``; drain the iterator."""
        for _ in weights:
            pass
        return {name for name, _ in self.named_parameters()}
