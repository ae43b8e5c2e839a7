"""The reference adapter: a small class a contributor writes around their model's OWN implementation.

It runs inside the reference's own environment (``omnitts-capture`` builds it from the reference's PyPI
requirements, which may conflict with the vLLM-Omni tree's), so this module imports only the standard library:
``from omnitts.validators.parity.adapter import ReferenceAdapter, Generation, Request`` pulls in nothing else.
numpy is imported lazily where arrays are built (every reference environment has it).

A subclass implements four things; the capture command calls nothing else:

* :meth:`ReferenceAdapter.from_checkpoint` builds the reference from a model directory (the same directory the
  integration loads);
* :meth:`ReferenceAdapter.generate` runs one request greedily (``seed=None``) or with a seed and returns the
  per-frame codes of every codebook (or the latents) and the waveform;
* :meth:`ReferenceAdapter.decode` turns given codes into a waveform (the decoder alone, to tell a drifting
  generator from a drifting codec);
* :meth:`ReferenceAdapter.write_random_checkpoint` (optional) writes a tiny random-weight checkpoint from the
  reference's own classes, in the real checkpoint's layout, for CI without weights.

Optionally :meth:`ReferenceAdapter.scores` returns per-frame top-k code ids of a teacher-forced pass (the criterion
for bf16, where free-running codes drift apart), and ``Generation.tensors`` names intermediate tensors.
docs/parity.md shows the real Qwen3-TTS adapter (``omnitts.reference_models.adapters.qwen3_tts``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar


@dataclass(frozen=True)
class Request:
    """One request of the capture's request set: the text and the model's own request fields (speaker, language,
    task type...), named as the release's serving adapter names them."""

    id: str
    text: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class Generation:
    """What the reference produced for one request.

    ``codes``: integer array ``[frames, codebooks]`` (frame-major; codebook 0 first), or None for a latent model;
    ``latents``: float array ``[frames, dim]`` for a model without discrete codes; ``waveform``: 1-D float32;
    ``tensors``: optional intermediate tensors by name (``"talker.layer0.out"``), arrays."""

    waveform: Any
    sample_rate: int
    codes: Any = None
    latents: Any = None
    tensors: dict[str, Any] = field(default_factory=dict)


class ReferenceAdapter:
    """Base class of a reference adapter (see the module docstring). Class attributes describe the reference."""

    #: the distribution whose version the capture records (e.g. "qwen-tts"); None for code outside a package
    package: ClassVar[str | None] = None
    #: "codes" (discrete codec frames) or "latents" (continuous frames)
    output: ClassVar[str] = "codes"

    dtype: str = "float32"
    device: str = "cpu"

    @classmethod
    def from_checkpoint(cls, path: Path, *, dtype: str = "float32", device: str = "cpu") -> ReferenceAdapter:
        """The reference built from the model directory ``path``, weights loaded, in eval mode."""
        raise NotImplementedError(f"{cls.__name__}.from_checkpoint")

    def generate(self, request: Request, *, seed: int | None = None) -> Generation:
        """One request end to end: greedy when ``seed`` is None, else sampled with that seed."""
        raise NotImplementedError(f"{type(self).__name__}.generate")

    def decode(self, codes: Any) -> Any:
        """The waveform (1-D float32) the reference's decoder makes of ``codes`` (``[frames, codebooks]``)."""
        raise NotImplementedError(f"{type(self).__name__}.decode")

    def scores(self, request: Request, codes: Any, k: int) -> Any | None:
        """Teacher-forced top-k: the reference run on ``codes`` as its own previous outputs, returning the ids of its
        ``k`` most likely codes at every frame and codebook (``[frames, codebooks, k]``). None: not supported."""
        return None

    @classmethod
    def write_random_checkpoint(cls, out: Path, *, seed: int = 0) -> dict[str, Any]:
        """Write a tiny random-weight checkpoint with the reference's own classes into ``out`` (the real
        checkpoint's layout; no degenerate tensors: the audio must depend on the codes and the text). Returns what
        the integration needs to know about it (e.g. a speaker name), recorded in the capture's manifest."""
        raise NotImplementedError(f"{cls.__name__} cannot write a random checkpoint")

    def versions(self) -> dict[str, str]:
        """Versions of what produced the capture (the adapter's package and the libraries it ran on)."""
        from importlib import metadata

        found = {}
        for dist in filter(None, [self.package, "torch", "transformers", "numpy"]):
            try:
                found[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
        return found


def load_adapter(spec: str) -> type[ReferenceAdapter]:
    """The adapter class named by ``module:Class`` or ``path/to/file.py:Class``."""
    import importlib
    import importlib.util

    where, sep, name = spec.rpartition(":")
    if not sep or not where or not name:
        raise ValueError(f"adapter {spec!r}: expected module:Class or path/to/file.py:Class")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ValueError(f"adapter {spec!r}: no such file {where}")
        module_spec = importlib.util.spec_from_file_location(f"omnitts_adapter_{path.stem}", path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    cls = getattr(module, name, None)
    if not (isinstance(cls, type) and issubclass(cls, ReferenceAdapter)):
        raise ValueError(f"adapter {spec!r}: {name} is not a ReferenceAdapter subclass in {where}")
    return cls
