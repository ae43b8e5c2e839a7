{{ cookiecutter.license_header }}
"""Side computation of {{ cookiecutter.camel }}, part 1: the flow-matching head and the latent feature encoder.

Runs outside the runner-stepped base LM (in the post-processing hook): given the LM's last hidden state ``h``, the
head integrates the velocity field ``v(x, t | h)`` with ``flow_steps`` explicit Euler steps from a noise sample
``x_0`` (t = 0) to the latent patch ``x_1`` (t = 1). The noise comes from a table seeded once and indexed by the
frame number on the device, so runs are deterministic (greedy parity) without a host round trip. The Euler loop is
a per-step hot loop: device tensors only, the time grid is pre-built, nothing reads a value back to the host.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .configuration_{{ cookiecutter.name }} import {{ cookiecutter.camel }}Config


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embedding ``[..., dim]`` of flow times ``t`` in ``[0, 1]``."""
    freqs = torch.exp(-math.log(1000.0) * torch.arange(dim // 2, device=t.device, dtype=torch.float32) / (dim // 2))
    angles = 1000.0 * t.to(torch.float32)[..., None] * freqs
    return torch.cat([angles.cos(), angles.sin()], dim=-1)


class {{ cookiecutter.camel }}FlowHead(nn.Module):
    """Conditional flow matching head: latent patch ``[B, patch_size, latent_dim]`` from the LM hidden ``[B, H]``."""

    time_dim = 16

    def __init__(self, config: {{ cookiecutter.camel }}Config) -> None:
        super().__init__()
        self.patch_size = config.patch_size
        self.latent_dim = config.latent_dim
        flat = config.patch_size * config.latent_dim
        self.in_proj = nn.Linear(flat + config.hidden_size + self.time_dim, config.flow_hidden_size)
        self.mid_proj = nn.Linear(config.flow_hidden_size, config.flow_hidden_size)
        self.out_proj = nn.Linear(config.flow_hidden_size, flat)
        self.register_buffer("t_span", torch.linspace(0.0, 1.0, config.flow_steps + 1), persistent=False)
        # Drawn on the CPU (the same noise on every device), then put where the model is built: vLLM builds it under
        # its device's default-device context and never moves non-persistent buffers (they are not in the weights).
        generator = torch.Generator(device="cpu").manual_seed(config.seed + 2)
        noise = torch.randn(config.max_frames + 1, flat, generator=generator, device="cpu")
        self.register_buffer("noise", noise.to(self.t_span.device), persistent=False)

    def velocity(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        # The embedding is computed in float32; the head runs in the engine's dtype (vLLM loads a float32
        # checkpoint in bfloat16 by default), so cast it before it meets the weights.
        temb = timestep_embedding(t, self.time_dim).to(x.dtype).expand(x.shape[0], -1)
        h = F.silu(self.in_proj(torch.cat([x, cond, temb], dim=-1)))
        return self.out_proj(F.silu(self.mid_proj(h)))

    def solve(self, cond: torch.Tensor, frame_idx: torch.Tensor) -> torch.Tensor:
        """Euler integration from the noise of frame ``frame_idx`` (``[B]``, on the device) to the latent patch."""
        dtype = self.in_proj.weight.dtype
        cond = cond.to(dtype)
        x = self.noise[frame_idx.clamp(max=self.noise.shape[0] - 1)].to(dtype)
        for i in range(self.t_span.shape[0] - 1):
            t = self.t_span[i]
            dt = self.t_span[i + 1] - self.t_span[i]
            x = x + dt * self.velocity(x, t, cond)
        return x.view(cond.shape[0], self.patch_size, self.latent_dim)


class {{ cookiecutter.camel }}FeatEncoder(nn.Module):
    """Latent patch ``[B, patch_size, latent_dim]`` -> the base LM's next input embedding ``[B, H]``."""

    def __init__(self, config: {{ cookiecutter.camel }}Config) -> None:
        super().__init__()
        self.proj = nn.Linear(config.patch_size * config.latent_dim, config.hidden_size)

    def forward(self, patch: torch.Tensor) -> torch.Tensor:
        return self.proj(patch.reshape(patch.shape[0], -1))
