{{cookiecutter.license_header}}
"""Reference adapter of {{cookiecutter.camel}}: the model's OWN implementation (the authors' package or code), for
reference parity (the add-tts-model guide's Phase 1: capture reference outputs, then compare the integration).

Fill in the methods around your reference implementation, then capture it and compare the integration with it:

    omnitts-capture --python REFERENCE_VENV/bin/python --checkpoint CHECKPOINT --out CAPTURE \
        --adapter ADAPTER
    pytest validators --model {{cookiecutter.name}} --engine offline \
        --checkpoint CHECKPOINT --reference CAPTURE

where ADAPTER is this file's path, a colon and the class name ({{cookiecutter.camel}}Reference).

The capture runs in the reference's own environment (its pins may conflict with vLLM-Omni's): import the
reference's packages inside the methods, so that this file imports wherever omnitts is. A worked example, around
the ``qwen-tts`` package: ``omnitts.reference_models.adapters.qwen3_tts`` (omnitts docs/parity.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnitts.validators.parity.adapter import Generation, ReferenceAdapter, Request


class {{cookiecutter.camel}}Reference(ReferenceAdapter):
    #: the reference's distribution on PyPI (its version goes into the capture's manifest); None for loose code
    package = None
    #: "codes" (discrete codec frames) or "latents" (continuous frames)
    output = "{{ 'latents' if cookiecutter.pattern == 'native-ar' else 'codes' }}"

    def __init__(self, model: Any, dtype: str, device: str) -> None:
        self.model, self.dtype, self.device = model, dtype, device

    @classmethod
    def from_checkpoint(cls, path: Path, *, dtype: str = "float32", device: str = "cpu") -> {{cookiecutter.camel}}Reference:
        """Load the reference from the checkpoint directory the integration loads too."""
        raise NotImplementedError("load the reference implementation from the checkpoint directory")

    def generate(self, request: Request, *, seed: int | None = None) -> Generation:
        """One request, greedy when ``seed`` is None: the per-frame {{ 'latents' if cookiecutter.pattern == 'native-ar' else 'codes of every codebook' }}
        ({{ '[frames, dim]' if cookiecutter.pattern == 'native-ar' else '[frames, codebooks]' }}) and the waveform, as the reference's own generate call
        produces them (``request.params``: speaker, language, ... as the serving adapter names them)."""
        raise NotImplementedError("run the reference's own generate call and return its frames and waveform")

    def decode(self, codes: Any) -> Any:
        """The waveform (1-D float32) the reference's decoder makes of ``codes`` alone."""
        raise NotImplementedError("run the reference's decoder on the given frames")
