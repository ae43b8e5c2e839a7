"""HF-style reference implementations: generate the whole utterance in one call and return the waveform.

These are the Phase-1 oracles of the guide ("run the reference model end-to-end ... capture reference outputs"):
a plain Python loop over frames with host-side stop checks and one decoder call over the complete sequence, no
runner, no streaming, no per-request state. They use the modules (and so the weights) of the correct reference
models, so a parity test compares only what the integration adds: stepping, batching, request state, chunked
decoding and the output contract.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import torch

PACKAGE = "omnitts.reference_models"


@dataclass
class ReferenceOutput:
    """One utterance from a reference: the waveform (1-D float32, on CPU) and what produced it."""

    text: str
    waveform: torch.Tensor
    sample_rate: int
    num_frames: int
    codes: torch.Tensor | None = None
    latents: torch.Tensor | None = None


def _module(model: str, stem: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.{model}.models.{model}.{stem}")


class TwoStageReference:
    """``ref_two_stage``: talker frame loop (code predictor per frame) until the stop token, then one decode."""

    model = "ref_two_stage"

    def __init__(self, config: Any | None = None, device: str | torch.device = "cpu") -> None:
        talker_mod = _module(self.model, "ref_two_stage_talker")
        code2wav_mod = _module(self.model, "ref_two_stage_code2wav")
        config_mod = _module(self.model, "configuration_ref_two_stage")
        self.config = config if config is not None else config_mod.RefTwoStageConfig()
        self.device = torch.device(device)
        self._kv_cache = talker_mod.KVCache
        self.talker = talker_mod.RefTwoStageTalkerForConditionalGeneration(config=self.config).to(self.device).eval()
        self.code2wav = code2wav_mod.RefTwoStageCode2Wav(config=self.config).to(self.device).eval()

    @torch.no_grad()
    def generate(self, text: str) -> ReferenceOutput:
        config, talker, device = self.config, self.talker, self.device
        prompt = torch.tensor(config.encode_text(text), dtype=torch.long, device=device)
        caches = [self._kv_cache() for _ in range(config.num_hidden_layers)]
        embed = talker.model.embed_tokens
        hidden = talker.model(embed(prompt), torch.arange(len(prompt), device=device), caches)[-1:]
        target = torch.tensor([config.frames_per_text_token * len(prompt)], device=device)
        frames: list[torch.Tensor] = []
        while True:
            frame_idx = torch.tensor([len(frames)], device=device)
            codes, stop = talker.code_predictor.predict_eager(hidden, frame_idx, target, embed.weight)
            if bool(stop[0]):
                break
            frames.append(codes[0])
            position = torch.tensor([len(prompt) + len(frames) - 1], device=device)
            hidden = talker.model(talker.frame_embedding(codes[0])[None, :], position, caches)[-1:]
        codes = torch.stack(frames) if frames else torch.zeros(0, config.num_code_groups, dtype=torch.long)
        if frames:
            waveform = self.code2wav.decoder(codes.T[None].to(device))[0].float()
        else:
            waveform = torch.zeros(0)
        return ReferenceOutput(text, waveform.cpu(), config.sample_rate, len(frames), codes=codes.cpu())


class SingleStageReference:
    """``ref_single_stage``: LM frame loop (parallel codebook heads) until the codec stop, then one codec decode."""

    model = "ref_single_stage"

    def __init__(self, config: Any | None = None, device: str | torch.device = "cpu") -> None:
        modeling = _module(self.model, "modeling_ref_single_stage")
        config_mod = _module(self.model, "configuration_ref_single_stage")
        self.config = config if config is not None else config_mod.RefSingleStageConfig()
        self.device = torch.device(device)
        self._kv_cache = modeling.KVCache
        self.net = modeling.RefSingleStageForGeneration(config=self.config).to(self.device).eval()

    @torch.no_grad()
    def generate(self, text: str) -> ReferenceOutput:
        config, net, device = self.config, self.net, self.device
        prompt = torch.tensor(config.encode_text(text), dtype=torch.long, device=device)
        caches = [self._kv_cache() for _ in range(config.num_hidden_layers)]
        hidden = net.lm(net.lm.embed_tokens(prompt), torch.arange(len(prompt), device=device), caches)[-1]
        target = config.frames_per_text_token * len(prompt)
        frames: list[torch.Tensor] = []
        while True:
            codes, stop = net.predict_frame(hidden, len(frames), target)
            if bool(stop):
                break
            frames.append(codes)
            position = torch.tensor([len(prompt) + len(frames) - 1], device=device)
            hidden = net.lm(net.frame_embedding(codes)[None, :], position, caches)[-1]
        codes = torch.stack(frames) if frames else torch.zeros(0, config.num_code_groups, dtype=torch.long)
        waveform = net.codec(codes.T[None].to(device))[0].float() if frames else torch.zeros(0)
        return ReferenceOutput(text, waveform.cpu(), config.sample_rate, len(frames), codes=codes.cpu())


class NativeArReference:
    """``ref_native_ar``: base LM step, stop head, flow head (Euler) -> latent patch -> next input; one VAE decode."""

    model = "ref_native_ar"

    def __init__(self, config: Any | None = None, device: str | torch.device = "cpu") -> None:
        modeling = _module(self.model, "modeling_ref_native_ar")
        config_mod = _module(self.model, "configuration_ref_native_ar")
        self.config = config if config is not None else config_mod.RefNativeArConfig()
        self.device = torch.device(device)
        self._kv_cache = modeling.KVCache
        self.net = modeling.RefNativeArForConditionalGeneration(config=self.config).to(self.device).eval()

    @torch.no_grad()
    def generate(self, text: str) -> ReferenceOutput:
        config, net, device = self.config, self.net, self.device
        prompt = torch.tensor(config.encode_text(text), dtype=torch.long, device=device)
        caches = [self._kv_cache() for _ in range(config.num_hidden_layers)]
        hidden = net.model(net.model.embed_tokens(prompt), torch.arange(len(prompt), device=device), caches)[-1:]
        target = torch.tensor([config.frames_per_text_token * len(prompt)], device=device)
        patches: list[torch.Tensor] = []
        while True:
            if bool(net.stop_flags(hidden, torch.tensor([len(patches)], device=device), target)[0]):
                break
            patch = net.flow_head.solve(hidden, torch.tensor([len(patches)], device=device))
            patches.append(patch[0])
            position = torch.tensor([len(prompt) + len(patches) - 1], device=device)
            hidden = net.model(net.feat_encoder(patch), position, caches)[-1:]
        if patches:
            latents = torch.cat(patches).float()
            waveform = net.audio_vae(latents[None])[0].float()
        else:
            latents = torch.zeros(0, config.latent_dim)
            waveform = torch.zeros(0)
        return ReferenceOutput(text, waveform.cpu(), config.sample_rate, len(patches), latents=latents.cpu())


REFERENCES: dict[str, type] = {
    "ref_two_stage": TwoStageReference,
    "ref_single_stage": SingleStageReference,
    "ref_native_ar": NativeArReference,
}


def make_reference(model: str, config: Any | None = None, device: str | torch.device = "cpu") -> Any:
    """The HF-style reference of a correct model (mutants are compared against their base model's reference)."""
    return REFERENCES[model](config=config, device=device)
