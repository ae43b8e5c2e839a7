"""What a run hands back: per request (tokens, streamed deltas, payloads, the offline output), per step, per run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from omnitts.knowledge.runner import RunnerContract
from omnitts.validators.runtime.harness.payloads import count_frames


@dataclass
class RequestResult:
    ext_id: str
    stage_ids: dict[int, str] = field(default_factory=dict)
    tokens: list[int] = field(default_factory=list)
    deltas: list[torch.Tensor] = field(default_factory=list)
    delta_steps: list[int] = field(default_factory=list)
    payloads: list[dict] = field(default_factory=list)
    # the entry stage's payloads (flat, on the host) when it is not the final stage: a two-stage talker's codes
    upstream_payloads: list[dict] = field(default_factory=list)
    sr_values: list[Any] = field(default_factory=list)
    offline: dict | None = None
    t_arrive: float = 0.0
    t_first_audio: float | None = None
    t_finish: float | None = None
    finish_step: int | None = None
    finished: bool = False
    aborted: bool = False
    eos: int | None = None

    @property
    def frames(self) -> int:
        """Codec frames generated: stage-0 tokens that are not the stop token."""
        return sum(1 for t in self.tokens if t != self.eos)

    @property
    def frames_emitted(self) -> int | None:
        """Codec/latent frames in the audio stage's payloads (``codes.audio`` / ``latent`` rows), if it emits them."""
        total = None
        for flat in self.payloads:
            n = count_frames(flat)
            if n is not None:
                total = (total or 0) + n
        return total

    @property
    def first_audio_step(self) -> int | None:
        """The engine step whose payload first carried audio samples."""
        return next((s for s, d in zip(self.delta_steps, self.deltas, strict=True) if d.numel() > 0), None)

    @property
    def steps_without_model_outputs(self) -> int:
        """Final-stage payloads without ``model_outputs`` (or ``audio``): steps a streaming client gets nothing from."""
        return sum(1 for flat in self.payloads if "model_outputs" not in flat and "audio" not in flat)

    @property
    def stream_audio(self) -> torch.Tensor:
        if not self.deltas:
            return torch.zeros(0)
        return torch.cat([d.reshape(-1).float() for d in self.deltas])

    @property
    def sample_rate(self) -> int | None:
        for v in reversed(self.sr_values):
            try:
                return int(torch.as_tensor(v).reshape(-1)[-1])
            except Exception:  # noqa: BLE001
                continue
        return None


@dataclass
class StepRecord:
    stage: int
    step: int
    req_ids: list[str]
    num_tokens: int
    steady: bool
    seconds: float


@dataclass
class RunResult:
    subject: str
    scenario: str
    requests: dict[str, RequestResult]
    steps: list[StepRecord]
    wall: float
    consolidation: str
    models: list[Any]
    contract: RunnerContract
    calls: list | None = None
    alias_violations: list[str] = field(default_factory=list)
    stage_devices: list[str] = field(default_factory=list)  # where each stage ran
    placement_findings: list[str] = field(default_factory=list)  # tensors off their stage's device (hostcopy)

    def audio(self, ext_id: str) -> torch.Tensor:
        return self.requests[ext_id].stream_audio

    def in_order(self, plans: list | None = None) -> list[RequestResult]:
        """The requests in arrival order of ``plans`` (default: the order they were added)."""
        if plans is None:
            return list(self.requests.values())
        return [self.requests[p.ext_id] for p in plans]
