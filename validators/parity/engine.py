"""The test process's side of an engine parity run: start the driver in the engine environment, read its arrays,
and hand them with the capture's as a :class:`ParityObservation` to the parity verdicts. Imports no vLLM.

The offline backend (``--reference CAPTURE`` with ``--engine offline --checkpoint DIR``) calls :func:`run_engine`
once per model and session, then :func:`observe`; ``validators/verdicts/parity.py`` judges.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from omnitts.validators.observations.audio import Source
from omnitts.validators.observations.parity import ParityObservation, ParityRequest
from omnitts.validators.parity.capture_file import Capture, checkpoint_fingerprint, read_capture


@dataclass
class EngineParityRun:
    result: dict  # the driver's result.json (startup_s, per-request prompt lengths, the in-memory patches, error)
    arrays: dict  # name -> numpy array: <id>/codes, <id>/waveform, <id>/decoded, batch/<id>/waveform
    wall_s: float
    log: Path

    @property
    def error(self) -> str | None:
        return self.result.get("error")


def run_engine(
    env, model: str, model_dir: Path, capture_dir: Path, out: Path, *, timeout: float = 1800
) -> EngineParityRun:
    """``env``: an ``EngineEnv`` bound to the tree under test (its ``vllm_omni`` first on the path)."""
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    args = [
        "-m", "omnitts.validators.parity.engine_run", "--tree", str(env.tree), "--model", model,
        "--model-dir", str(Path(model_dir).resolve()), "--capture", str(Path(capture_dir).resolve()), "--out", str(out),
    ]  # fmt: skip
    env.run(args, timeout=timeout, log=out / "engine.log")
    wall = time.monotonic() - started
    result_file = out / "result.json"
    result = json.loads(result_file.read_text()) if result_file.is_file() else {"error": "the driver wrote no result"}
    arrays = {}
    if (out / "engine.npz").is_file():
        with np.load(out / "engine.npz") as data:
            arrays = {key: data[key] for key in data.files}
    return EngineParityRun(result, arrays, wall, out / "engine.log")


def checkpoint_differs(capture: Capture, model_dir: Path | None) -> tuple[str, ...]:
    """The capture's checkpoint files whose digest differs from (or is absent in) ``model_dir``."""
    if model_dir is None:
        return ()
    recorded = (capture.manifest.get("checkpoint") or {}).get("files") or {}
    present = checkpoint_fingerprint(Path(model_dir))["files"]
    return tuple(sorted(rel for rel, digest in recorded.items() if present.get(rel) != digest))


def reference_name(capture: Capture) -> str:
    ref = capture.manifest.get("reference") or {}
    package = ref.get("package") or ref.get("class") or "the reference"
    version = (ref.get("versions") or {}).get("package")
    return f"{package} {version}" if version else str(package)


def observe(
    capture: Capture | Path,
    run: EngineParityRun,
    *,
    release: str | None,
    model: str,
    model_dir: Path | None = None,
    device: str = "cpu",
) -> ParityObservation:
    """What the engine run observed for each capture request, beside the reference's arrays."""
    capture = read_capture(capture) if not isinstance(capture, Capture) else capture
    requests = []
    for req in capture.requests:
        requests.append(
            ParityRequest(
                **req.reference_side(),
                codes=run.arrays.get(f"{req.id}/codes"),
                waveform=run.arrays.get(f"{req.id}/waveform"),
                batched=run.arrays.get(f"batch/{req.id}/waveform"),
                decoded=run.arrays.get(f"{req.id}/decoded"),
            )
        )
    followed = tuple(f for worker in run.result.get("install") or () for f in worker.get("followed", ()))
    about = {k: run.result.get(k) for k in ("startup_s", "solo_s", "batch_s")}
    return ParityObservation(
        Source("offline", device),
        str(capture.folder or "the capture"),
        reference_name(capture),
        model,
        release,
        capture.dtype,
        tuple(requests),
        sample_rate=capture.sample_rate,
        followed=followed,
        checkpoint_differs=checkpoint_differs(capture, model_dir),
        error=f"{run.error} (engine log: {run.log})" if run.error else None,
        about={**about, "wall_s": round(run.wall_s, 1)},
    )
