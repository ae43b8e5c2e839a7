"""The one tolerance table of the audio comparisons, per backend and device (the dtype the audio was made in).

* ``audio``: two runs of the same request (batched vs solo, served vs reference). The harness runs float32: on the
  CPU kernels give the same result whatever the batch, so 1e-4/1e-5 is float32 noise; on CUDA kernels differ between
  batch shapes, 10x looser (TF32 is off). The real engine may run the model in bfloat16 (vLLM downcasts float32
  checkpoints on CPU) and the server answers 16-bit PCM (quantisation step 3e-5): 1e-3/1e-4.
* ``stream``: a stream against the whole output of the same request. In the harness both are built from the same
  per-step tensors, so only bit-equality is right; through the engine the whole output is another request.
* ``chunk``: chunked decoding (left context) against one-piece decoding: convolution edges, 10x the audio table.

``PARITY``, per dtype of the run (the capture's, which the engine run follows): the integration against the model's
own implementation (``validators/verdicts/parity.py``), whatever the backend. float32: codes exact, waveforms within
atol 1e-5 (measured max |diff| 0 solo and <= 1.1e-7 batched on Qwen3-TTS vs ``qwen-tts``, docs/parity.md: a margin of
~90). bfloat16: free-running codes drift apart after 15-23 frames in the release's own bf16, so codes are judged by
the top-k criterion (k = 5, as vLLM's ``check_logprobs_close``) and waveforms by length only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from omnitts.validators.observations.audio import Source


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float

    def __str__(self) -> str:
        return "bit-exact" if self.rtol == self.atol == 0 else f"rtol={self.rtol:g}, atol={self.atol:g}"


EXACT = Tolerance(0.0, 0.0)
_ENGINE = Tolerance(1e-3, 1e-4)
# (backend, device, purpose) -> tolerance; device "*" is any device
TABLE: dict[tuple[str, str, str], Tolerance] = {
    ("harness", "cpu", "audio"): Tolerance(1e-4, 1e-5),
    ("harness", "cuda", "audio"): Tolerance(1e-3, 1e-4),
    ("harness", "*", "stream"): EXACT,
    ("harness", "cpu", "chunk"): Tolerance(1e-3, 1e-4),
    ("harness", "cuda", "chunk"): Tolerance(1e-2, 1e-3),
    **{(backend, "*", purpose): _ENGINE for backend in ("offline", "server", "url") for purpose in ("audio", "stream")},
}


def tolerance(source: Source, purpose: str = "audio") -> Tolerance:
    device = "cuda" if source.device.startswith("cuda") else source.device
    found = TABLE.get((source.backend, device, purpose)) or TABLE.get((source.backend, "*", purpose))
    if found is None:
        raise KeyError(f"no tolerance for {purpose} on the {source.backend} backend ({source.device})")
    return found


@dataclass(frozen=True)
class MemoryTolerance:
    """How far a worker's memory may stay above its baseline after aborts (i5.abort_recovery), in bytes.

    * ``held``: tensors the model reaches beyond its parameters and buffers (per-request caches, a generator's
      frame): exact, so what is left is what leaked; 16 KiB covers a model's bookkeeping of a few small tensors
      (one aborted request of the tiny scaffolded model leaves 23 KiB, and the check aborts nine).
    * ``rss``: the process's resident set: the allocator keeps freed pages, so only a leak far above the held bytes
      shows; docs/diagnostics.md has the growth measured on correct models.
    * ``cuda``: ``torch.cuda.memory_allocated`` (the caching allocator's reserve is not counted).
    """

    held: int
    rss: int
    cuda: int


MEMORY = MemoryTolerance(held=16 * 1024, rss=64 * 1024 * 1024, cuda=1024 * 1024)


@dataclass(frozen=True)
class ParityTolerance:
    """How the integration is compared with its reference in one dtype."""

    wave_atol: float  # end to end, batched and decoder alone: absolute, float samples
    exact_codes: bool  # free-running codes must be equal (else: the top-k criterion)
    topk: int = 0

    def __str__(self) -> str:
        codes = "codes exact" if self.exact_codes else f"codes within the top-{self.topk}"
        wave = "waveforms by length" if math.isinf(self.wave_atol) else f"waveforms atol {self.wave_atol:g}"
        return f"{codes}, {wave}"


PARITY: dict[str, ParityTolerance] = {
    "float32": ParityTolerance(wave_atol=1e-5, exact_codes=True),
    "bfloat16": ParityTolerance(wave_atol=math.inf, exact_codes=False, topk=5),
}


def parity_tolerance(dtype: str) -> ParityTolerance:
    found = PARITY.get(dtype)
    if found is None:
        raise KeyError(f"no parity tolerance for dtype {dtype!r} (known: {', '.join(PARITY)})")
    return found
