# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""Side computation of RefNativeAr, part 2: the VAE-style audio decoder (latent frames -> waveform).

Causal by construction (left-padded convolutions, transposed convolutions trimmed of their overlap tail, strides
multiplying to ``hop_length``), so decoding ``[decode_pad_frames of context | new frames]`` and dropping the
context's samples gives the new frames' audio exactly as decoding the whole utterance would. Always float32.
"""

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_ref_native_ar import RefNativeArConfig


class RefNativeArCausalConv1d(nn.Conv1d):
    """A 1-D convolution padded on the left only, so output ``t`` never sees input after ``t``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, ((self.kernel_size[0] - 1) * self.dilation[0], 0)))


class RefNativeArAudioVAEDecoder(nn.Module):
    """Latents ``[B, T, latent_dim]`` -> waveform ``[B, T * hop_length]``."""

    def __init__(self, config: RefNativeArConfig) -> None:
        super().__init__()
        self.pre = RefNativeArCausalConv1d(config.latent_dim, config.vae_dim, 3)
        self.rates = list(config.upsample_rates)
        channels = [config.vae_dim, *config.upsample_channels]
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(channels[i], channels[i + 1], 2 * rate, stride=rate) for i, rate in enumerate(self.rates)
        )
        self.post = RefNativeArCausalConv1d(channels[-1], 1, 7)

    def forward(self, latents: torch.Tensor) -> torch.Tensor:
        x = F.silu(self.pre(latents.transpose(1, 2)))
        for up, rate in zip(self.ups, self.rates, strict=True):
            frames = x.shape[-1]
            x = F.silu(up(x)[..., : frames * rate])  # drop the overlap tail: causal transposed convolution
        return torch.tanh(0.2 * self.post(x)).squeeze(1)
