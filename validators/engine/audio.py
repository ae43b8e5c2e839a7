"""Decoding what the engine tier gets back: server response formats and SSE streams (test-process side)."""

from __future__ import annotations

import base64
import io
import json

import numpy as np

# What /v1/audio/speech of a release offers is read from the tree (protocol Literal); these decode here.
PCM_DTYPE = np.int16


def pcm(body: bytes) -> np.ndarray:
    """Raw 16-bit little-endian mono PCM as float32 in [-1, 1)."""
    return np.frombuffer(body[: len(body) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0


_AV_DECODE = (
    "import av, sys, numpy as np\n"
    "with av.open(sys.argv[1]) as c:\n"
    "    s = c.streams.audio[0]\n"
    "    f = [x.to_ndarray().reshape(-1) for x in c.decode(s)]\n"
    "    np.save(sys.argv[2], np.concatenate(f).astype(np.float32) if f else np.zeros(0, np.float32))\n"
    "    print(s.rate)\n"
)


def _decode_with_engine_python(python: str, fmt: str, body: bytes) -> tuple[np.ndarray, int]:
    """PyAV lives in the engine environment (not a dependency of omnitts itself): decode there."""
    import subprocess
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / f"body.{fmt}", Path(tmp) / "out.npy"
        src.write_bytes(body)
        proc = subprocess.run(
            [python, "-c", _AV_DECODE, str(src), str(dst)], capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            raise RuntimeError((proc.stderr.strip().splitlines() or ["PyAV failed"])[-1])
        return np.load(dst), int(proc.stdout.strip())


def decode(fmt: str, body: bytes, sample_rate: int, *, engine_python: str | None = None) -> tuple[np.ndarray, int]:
    """(samples, sample rate) of one response body; raises ValueError naming the format when it does not decode."""
    if fmt == "pcm":
        return pcm(body), sample_rate
    try:
        if fmt in ("wav", "flac"):
            import soundfile as sf

            data, sr = sf.read(io.BytesIO(body), dtype="float32", always_2d=False)
            return np.asarray(data).reshape(-1), int(sr)
        try:
            import av  # compressed formats: PyAV
        except ImportError:
            if engine_python is None:
                raise
            return _decode_with_engine_python(engine_python, fmt, body)
        with av.open(io.BytesIO(body)) as container:
            stream = container.streams.audio[0]
            frames = [frame.to_ndarray().reshape(-1) for frame in container.decode(stream)]
            return (np.concatenate(frames) if frames else np.zeros(0, np.float32)), int(stream.rate)
    except Exception as exc:
        raise ValueError(f"{fmt}: body of {len(body)} bytes does not decode: {type(exc).__name__}: {exc}") from exc


def sse_deltas(body: bytes) -> tuple[list[bytes], list[str]]:
    """The decoded audio of every ``speech.audio.delta`` event, and the event types in order."""
    deltas, events = [], []
    for block in body.decode("utf-8", "replace").split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.strip().splitlines() if ": " in line)
        if "event" not in lines:
            continue
        events.append(lines["event"])
        if lines["event"] == "speech.audio.delta":
            deltas.append(base64.b64decode(json.loads(lines["data"])["audio"]))
    return deltas, events
