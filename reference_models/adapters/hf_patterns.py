"""Reference adapters of the scaffold's three patterns: their HF-style references (``reference_models/hf_reference.py``,
a plain frame loop and one decode over the whole utterance), so the reference models go through the same capture and
comparison as an upstream model does. They run in omnitts's own environment (``omnitts-capture --python``).

Their weights come from ``config.seed`` (the reference models build themselves), so the "checkpoint" they write is
the config alone (``config.json``) plus the model's name; ``from_checkpoint`` builds the reference from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from omnitts.validators.parity.adapter import Generation, ReferenceAdapter, Request


class _HFPattern(ReferenceAdapter):
    model: ClassVar[str] = ""

    def __init__(self, reference, dtype: str, device: str) -> None:
        self.reference, self.dtype, self.device = reference, dtype, device

    @classmethod
    def from_checkpoint(cls, path: Path, *, dtype: str = "float32", device: str = "cpu") -> _HFPattern:
        from omnitts.reference_models.hf_reference import make_reference

        written = json.loads((Path(path) / "omnitts_reference.json").read_text())
        if written.get("model") != cls.model:
            raise ValueError(f"{path} holds a {written.get('model')!r} checkpoint, not {cls.model!r}")
        if dtype != "float32":
            raise ValueError(f"{cls.model}: the HF-style reference runs in float32 only")
        return cls(make_reference(cls.model, device=device), dtype, device)

    def generate(self, request: Request, *, seed: int | None = None) -> Generation:
        out = self.reference.generate(request.text)
        return Generation(
            waveform=out.waveform.numpy(),
            sample_rate=out.sample_rate,
            codes=None if out.codes is None else out.codes.numpy(),
            latents=None if out.latents is None else out.latents.numpy(),
        )

    @classmethod
    def write_random_checkpoint(cls, out: Path, *, seed: int = 0) -> dict[str, Any]:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        config = cls._config_dict()
        (out / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True, default=str) + "\n")
        return {"model": cls.model, "params": {}}

    @classmethod
    def _config_dict(cls) -> dict:
        from omnitts.reference_models.hf_reference import make_reference

        config = make_reference(cls.model).config
        return config.to_dict() if hasattr(config, "to_dict") else dict(vars(config))


class TwoStageHF(_HFPattern):
    model = "ref_two_stage"

    def decode(self, codes: Any):
        import torch

        codes = torch.as_tensor(codes, dtype=torch.long)
        with torch.no_grad():
            return self.reference.code2wav.decoder(codes.T[None])[0].float().numpy()


class SingleStageHF(_HFPattern):
    model = "ref_single_stage"

    def decode(self, codes: Any):
        import torch

        codes = torch.as_tensor(codes, dtype=torch.long)
        with torch.no_grad():
            return self.reference.net.codec(codes.T[None])[0].float().numpy()


class NativeArHF(_HFPattern):
    model = "ref_native_ar"
    output = "latents"

    def decode(self, latents: Any):
        import torch

        latents = torch.as_tensor(latents, dtype=torch.float32)
        with torch.no_grad():
            return self.reference.net.audio_vae(latents[None])[0].float().numpy()


ADAPTERS = {cls.model: cls for cls in (TwoStageHF, SingleStageHF, NativeArHF)}


class ScaffoldedTwoStageHF(TwoStageHF):
    """The two-stage pattern's HF-style reference on the checkpoint of a model ``omnitts-scaffold new --pattern
    two-stage`` wrote (any name): its ``config.json`` (``python -m omnitts.validators.engine.modeldir``) holds the
    pattern's fields and the seed its weights are drawn from, so the reference computes what the tiny scaffolded model
    computes. The tutorial's stand-in for a real model's own implementation."""

    @classmethod
    def from_checkpoint(cls, path: Path, *, dtype: str = "float32", device: str = "cpu") -> ScaffoldedTwoStageHF:
        import inspect

        from omnitts.reference_models.hf_reference import TwoStageReference, _module

        if dtype != "float32":
            raise ValueError("the HF-style reference runs in float32 only")
        fields = json.loads((Path(path) / "config.json").read_text())
        config_cls = _module(cls.model, "configuration_ref_two_stage").RefTwoStageConfig
        known = set(inspect.signature(config_cls.__init__).parameters)
        config = config_cls(**{k: v for k, v in fields.items() if k in known})
        return cls(TwoStageReference(config=config, device=device), dtype, device)
