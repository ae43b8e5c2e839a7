"""Golden outputs of the reference models: ``python -m omnitts.reference_models.goldens [--write]``.

One small JSON per model under ``goldens/``: for each golden text the greedy codes (or, for the native-AR model,
the number of latent frames plus latent statistics), and a fingerprint of the waveform (length, mean, std, peak
and 64 evenly spaced samples). Written on CPU; ``tests/reference_models/test_goldens.py`` compares the reference
and the served integration against them on CPU or CUDA within ``WAVEFORM_ATOL``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from omnitts.reference_models import hf_reference

GOLDEN_DIR = Path(__file__).resolve().parent / "goldens"
GOLDEN_TEXTS = ("hello world", "The quick brown fox.", "hi")
MODELS = ("ref_two_stage", "ref_single_stage", "ref_native_ar")
NUM_SAMPLES = 64
WAVEFORM_ATOL = 1e-4
LATENT_ATOL = 1e-4


def waveform_fingerprint(waveform: torch.Tensor) -> dict[str, Any]:
    wav = waveform.detach().to("cpu", torch.float64).reshape(-1)
    n = wav.numel()
    picks = torch.linspace(0, max(n - 1, 0), NUM_SAMPLES).round().long() if n else torch.zeros(0, dtype=torch.long)
    return {
        "num_samples": n,
        "mean": float(wav.mean()) if n else 0.0,
        "std": float(wav.std()) if n > 1 else 0.0,
        "peak": float(wav.abs().max()) if n else 0.0,
        "samples": [float(x) for x in wav[picks]] if n else [],
    }


def codes_digest(codes: torch.Tensor) -> str:
    return hashlib.sha256(json.dumps(codes.tolist()).encode()).hexdigest()


def utterance_golden(output: hf_reference.ReferenceOutput) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "text": output.text,
        "num_frames": output.num_frames,
        "sample_rate": output.sample_rate,
        "waveform": waveform_fingerprint(output.waveform),
    }
    if output.codes is not None:
        entry["codes"] = output.codes.tolist()
        entry["codes_sha256"] = codes_digest(output.codes)
    if output.latents is not None:
        entry["latents"] = waveform_fingerprint(output.latents)
    return entry


def compute_golden(model: str, device: str | torch.device = "cpu") -> dict[str, Any]:
    reference = hf_reference.make_reference(model, device=device)
    return {
        "model": model,
        "torch": torch.__version__,
        "utterances": [utterance_golden(reference.generate(text)) for text in GOLDEN_TEXTS],
    }


def golden_path(model: str) -> Path:
    return GOLDEN_DIR / f"{model}.json"


def load_golden(model: str) -> dict[str, Any]:
    return json.loads(golden_path(model).read_text(encoding="utf-8"))


def write_goldens(models: tuple[str, ...] = MODELS) -> list[Path]:
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    paths = []
    for model in models:
        path = golden_path(model)
        path.write_text(json.dumps(compute_golden(model), indent=1) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def compare_fingerprint(actual: dict[str, Any], expected: dict[str, Any], atol: float) -> list[str]:
    """Differences between two fingerprints (empty when they match within ``atol``)."""
    problems = []
    if actual["num_samples"] != expected["num_samples"]:
        return [f"num_samples {actual['num_samples']} != {expected['num_samples']}"]
    for key in ("mean", "std", "peak"):
        if abs(actual[key] - expected[key]) > atol:
            problems.append(f"{key} {actual[key]:.6g} != {expected[key]:.6g}")
    worst = max((abs(a - b) for a, b in zip(actual["samples"], expected["samples"], strict=True)), default=0.0)
    if worst > atol:
        problems.append(f"samples differ by up to {worst:.3g} (atol {atol})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite goldens/*.json (CPU)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.write:
        for path in write_goldens():
            print(f"wrote {path}")
        return 0
    failed = 0
    for model in MODELS:
        fresh, stored = compute_golden(model), load_golden(model)
        for got, want in zip(fresh["utterances"], stored["utterances"], strict=True):
            problems = compare_fingerprint(got["waveform"], want["waveform"], WAVEFORM_ATOL)
            if got.get("codes") != want.get("codes"):
                problems.append("codes differ")
            failed += bool(problems)
            print(f"{model} {got['text']!r}: {'; '.join(problems) or 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
