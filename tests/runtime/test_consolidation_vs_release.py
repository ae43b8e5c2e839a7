"""Our per-era consolidation equals each release's real ``add_multimodal_tensor`` + ``_consolidate_multimodal_tensors``.

The real methods are compiled out of the nine release trees fetched from PyPI into the cache (see
release_source.py); a release that cannot be fetched fails its cases, it never skips them.
"""

from __future__ import annotations

import pytest
import release_source
import torch

from omnitts.knowledge.runner import KNOWN_RELEASES, consolidation_era
from omnitts.validators.runtime.consolidation import EraAccumulator, RealStateAdapter

SR = torch.tensor(16000, dtype=torch.int32)


def _wave(n: int, seed: int, shape: tuple[int, ...] | None = None) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(n, generator=g)
    return t.reshape(shape) if shape else t


CORPUS: dict[str, tuple[str | None, list]] = {
    "delta_1d_with_sr": ("audio", [{"model_outputs": _wave(n, i), "sr": SR} for i, n in enumerate((5, 7, 3, 9))]),
    "delta_2d_with_sr": ("audio", [{"model_outputs": _wave(n, i, (1, n)), "sr": SR} for i, n in enumerate((4, 6))]),
    "uneven_shapes": (
        "audio",
        [
            {"model_outputs": _wave(4, 0, (1, 4))},
            {"model_outputs": _wave(6, 1)},
            {"model_outputs": _wave(2, 2, (2, 1))},
        ],
    ),
    "single_step": ("audio", [{"model_outputs": _wave(8, 3), "sr": SR}]),
    "audio_key_direct": ("audio", [{"audio": _wave(3, i), "sr": SR} for i in range(3)]),
    "hidden_and_model_outputs": (
        "audio",
        [{"hidden": _wave(2, 10 + i), "model_outputs": _wave(4, i)} for i in range(3)],
    ),
    "codes_and_meta": (
        "audio",
        [
            {
                "model_outputs": _wave(4, i),
                "codes.audio": torch.full((1, 2), i),
                "meta": {"finished": torch.tensor(i == 2)},
            }
            for i in range(3)
        ],
    ),
    "sr_python_int": ("audio", [{"model_outputs": _wave(4, i), "sr": 24000} for i in range(3)]),
    "empty_deltas": ("audio", [{"model_outputs": _wave(n, i), "sr": SR} for i, n in enumerate((0, 5, 0, 2))]),
    "alias_speech": ("speech", [{"model_outputs": _wave(3, i)} for i in range(3)]),
    "no_mm_type": (None, [{"model_outputs": _wave(3, i)} for i in range(3)]),
    "raw_tensor_payload": ("audio", [_wave(3, i) for i in range(3)]),
    "chunk_metadata": (
        "audio",
        [
            {
                "model_outputs": _wave(3, i),
                "tts_is_last_chunk": torch.tensor(i == 2),
                "meta.segment_end": torch.tensor(i),
            }
            for i in range(3)
        ],
    ),
    "sr_list_1d": ("audio", [{"model_outputs": _wave(3, i), "sr": torch.tensor([16000])} for i in range(3)]),
}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
        )
    return a == b


def _describe(d) -> str:
    def one(v):
        if isinstance(v, torch.Tensor):
            return f"Tensor{tuple(v.shape)}:{v.dtype}"
        if isinstance(v, list):
            return "[" + ", ".join(one(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {one(x)}" for k, x in v.items()) + "}"
        return repr(v)

    return one(d)


@pytest.fixture(scope="module", params=KNOWN_RELEASES)
def release(request):
    return release_source.load(request.param)


def _fresh_payloads(payloads):
    # the engine receives fresh deserialised tensors each step; never share objects between runs
    def cp(x):
        if isinstance(x, torch.Tensor):
            return x.clone()
        if isinstance(x, dict):
            return {k: cp(v) for k, v in x.items()}
        return x

    return [cp(p) for p in payloads]


@pytest.mark.parametrize("case", sorted(CORPUS))
@pytest.mark.parametrize("kind", ["final_only", "delta"])
def test_era_matches_release(release, case, kind):
    mm_type, payloads = CORPUS[case]
    era = consolidation_era(release.version)
    kind_enum = {
        "final_only": release_source.RequestOutputKind.FINAL_ONLY,
        "delta": release_source.RequestOutputKind.DELTA,
    }[kind]
    real = RealStateAdapter(release.state_cls, era, release.payload_cls, kind_enum)
    ours = EraAccumulator(era, output_kind=kind)
    for p_real, p_ours in zip(_fresh_payloads(payloads), _fresh_payloads(payloads), strict=True):
        real.add(p_real, mm_type)
        ours.add(p_ours, mm_type)
    got_real, got_ours = real.consolidate(), ours.consolidate()
    assert _same(got_real, got_ours), (
        f"vLLM-Omni {release.version} ({release.source}) case {case}/{kind}:\n"
        f"  real: {_describe(got_real)}\n  ours: {_describe(got_ours)}"
    )


def test_audio_consolidation_differs_across_eras():
    """Sanity: the eras really differ where docs/validators.md says they do."""
    payloads = CORPUS["delta_1d_with_sr"][1]
    out = {}
    for era in ("0.14", "0.18", "0.20", "0.26"):
        acc = EraAccumulator(era)
        for p in _fresh_payloads(payloads):
            acc.add(p, "audio")
        out[era] = acc.consolidate()
    assert isinstance(out["0.14"]["audio"], list) and isinstance(out["0.18"]["audio"], list)
    assert isinstance(out["0.20"]["audio"], torch.Tensor) and out["0.20"]["audio"].numel() == 24
    assert torch.equal(out["0.26"]["audio"], out["0.20"]["audio"])
