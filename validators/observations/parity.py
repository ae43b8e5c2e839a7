"""What a parity run saw: per request of a reference capture, the reference's arrays and the integration's.

The capture (``omnitts-capture``, ``validators/parity/capture_file.py``) gives the reference side; a backend runs the
integration on the capture's requests and records the other side (the offline engine: the codes its decoder received,
the waveform alone and batched, its decoder alone on the reference's codes; the harness: the frames and waveform of
a reference model). Nothing here is judged: ``validators/verdicts/parity.py`` does that.
"""

from __future__ import annotations

import numpy as np

from omnitts.validators.observations.audio import Source
from omnitts.validators.observations.schema import observation


@observation
class ParityRequest:
    """One capture request: ``ref_*`` from the reference, the rest from the integration (None: not observed)."""

    request: str  # the capture's request id
    text: str
    ref_waveform: np.ndarray
    ref_codes: np.ndarray | None = None  # int64 [frames, codebooks]
    ref_latents: np.ndarray | None = None  # float32 [frames, dim] (latent models)
    ref_decoded: np.ndarray | None = None  # the reference's decoder alone on its own codes
    ref_topk: np.ndarray | None = None  # int64 [frames, codebooks, k]: the reference's k best codes on its own path
    codes: np.ndarray | None = None  # what the integration's decoder received
    latents: np.ndarray | None = None
    waveform: np.ndarray | None = None  # the request alone
    batched: np.ndarray | None = None  # the request submitted with all the others
    decoded: np.ndarray | None = None  # the integration's decoder alone on the reference's codes


@observation
class ParityObservation:
    """A capture's requests through the integration. ``dtype``: the capture's (the run follows it); ``release`` and
    ``model`` name the vLLM-Omni model whose by-design differences from the reference apply (``knowledge/
    references.py``); ``followed``: what the run changed to follow the dtype (e.g. a hard-coded bf16 attribute set to
    float32), reported beside the verdict; ``checkpoint``: the capture's checkpoint files whose digest differs from
    the checkpoint the integration ran (empty: the same model)."""

    source: Source
    capture: str  # the capture folder
    reference: str  # the reference package and version (``qwen-tts 0.1.1``)
    model: str
    release: str | None
    dtype: str
    requests: tuple[ParityRequest, ...]
    sample_rate: int | None = None
    followed: tuple[str, ...] = ()
    checkpoint_differs: tuple[str, ...] = ()
    decoder_alone: bool = True  # the backend runs the integration's decoder alone (the harness does not)
    error: str | None = None  # the run died before it observed every request
    about: dict | None = None  # timings (engine start-up, solo, batch)
