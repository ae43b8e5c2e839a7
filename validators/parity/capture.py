"""Run a reference adapter over a request set and write a capture (inside the reference's own environment).

``python -m omnitts.validators.parity.capture --adapter SPEC --checkpoint DIR --out CAPTURE [--requests FILE]
[--dtype float32] [--seed N] [--random-checkpoint]`` is what ``omnitts-capture`` runs in the reference environment
(omnitts on ``PYTHONPATH`` through an overlay, not installed). With ``--random-checkpoint`` the adapter first writes
a tiny random-weight checkpoint into ``DIR`` (its own classes, the real layout); the request fields it returns are
merged into every request. Per request it records the codes (or latents), the waveform, the decoder alone on the
codes, and the adapter's named tensors; the manifest records versions, dtype, device, the mode (greedy or seed) and
the checkpoint's fingerprint. Imports only the standard library and numpy besides the adapter.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path

from omnitts.validators.parity.adapter import Request, load_adapter
from omnitts.validators.parity.capture_file import CapturedRequest, checkpoint_fingerprint, write_capture

# The fixed request set: distinct lengths and characters; the last two differ only at their end (a truncated prompt
# gives them the same audio).
TEXTS = (
    "Hello there.",
    "A second, longer sentence for the engine.",
    "Numbers: 1 2 3.",
    "Four: the last text, with digits 0123.",
    "Four: the last text, with digits 4567.",
)


def default_requests(params: dict | None = None) -> list[Request]:
    return [Request(f"r{i}", text, dict(params or {})) for i, text in enumerate(TEXTS)]


def read_requests(path: Path, params: dict | None = None) -> list[Request]:
    """A JSON list of ``{"id", "text", "params"}`` (``params`` merged over the checkpoint's own request fields)."""
    data = json.loads(Path(path).read_text())
    if not isinstance(data, list) or not all(isinstance(r, dict) and "text" in r for r in data):
        raise ValueError(f"{path}: expected a JSON list of objects with a 'text'")
    base = params or {}
    return [Request(str(r.get("id", f"r{i}")), r["text"], {**base, **r.get("params", {})}) for i, r in enumerate(data)]


def run(
    adapter_spec: str,
    checkpoint: Path,
    out: Path,
    *,
    requests_file: Path | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    seed: int | None = None,
    random_checkpoint: bool = False,
    random_seed: int = 0,
) -> dict:
    import numpy as np

    cls = load_adapter(adapter_spec)
    started = time.monotonic()
    written: dict = {}
    if random_checkpoint:
        written = cls.write_random_checkpoint(Path(checkpoint), seed=random_seed) or {}
        (Path(checkpoint) / "omnitts_reference.json").write_text(json.dumps(written, indent=1) + "\n")
    elif (Path(checkpoint) / "omnitts_reference.json").is_file():
        written = json.loads((Path(checkpoint) / "omnitts_reference.json").read_text())
    params = written.get("params", {})
    requests = read_requests(requests_file, params) if requests_file else default_requests(params)
    adapter = cls.from_checkpoint(Path(checkpoint), dtype=dtype, device=device)
    built_s = time.monotonic() - started
    captured = []
    sample_rate = None
    for req in requests:
        t0 = time.monotonic()
        gen = adapter.generate(req, seed=seed)
        arrays = {"waveform": np.asarray(gen.waveform, dtype=np.float32).reshape(-1)}
        if gen.codes is not None:
            arrays["codes"] = np.asarray(gen.codes, dtype=np.int64)
        if gen.latents is not None:
            arrays["latents"] = np.asarray(gen.latents, dtype=np.float32)
        frames = arrays.get("codes", arrays.get("latents"))
        if frames is not None:  # the decoder alone on the frames generate produced
            arrays["decoded"] = np.asarray(adapter.decode(frames), dtype=np.float32).reshape(-1)
        for name, value in (gen.tensors or {}).items():
            arrays[f"t/{name}"] = np.asarray(value)
        sample_rate = gen.sample_rate
        captured.append(CapturedRequest(req.id, req.text, req.params, arrays, time.monotonic() - t0))
    manifest = {
        "reference": {
            "adapter": adapter_spec,
            "class": f"{cls.__module__}.{cls.__qualname__}",
            "package": cls.package,
            "output": cls.output,
            "versions": adapter.versions(),
            "python": platform.python_version(),
        },
        "checkpoint": {"path": str(Path(checkpoint).resolve()), **checkpoint_fingerprint(Path(checkpoint))},
        "random_checkpoint": {"seed": random_seed, **written} if random_checkpoint else None,
        "dtype": dtype,
        "device": device,
        "mode": "greedy" if seed is None else {"seed": seed},
        "sample_rate": sample_rate,
        "build_s": round(built_s, 3),
        "wall_s": round(time.monotonic() - started, 3),
    }
    write_capture(out, manifest, captured)
    return {"out": str(out), "requests": len(captured), "wall_s": manifest["wall_s"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnitts-capture-run", description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", required=True, help="module:Class or path/to/adapter.py:Class")
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--requests", type=Path, default=None)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--random-checkpoint", action="store_true")
    parser.add_argument("--random-seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        result = run(
            args.adapter,
            args.checkpoint,
            args.out,
            requests_file=args.requests,
            dtype=args.dtype,
            device=args.device,
            seed=args.seed,
            random_checkpoint=args.random_checkpoint,
            random_seed=args.random_seed,
        )
    except Exception as exc:  # one line for the user; the traceback for the log
        traceback.print_exc()
        print(f"omnitts-capture: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
