"""WAV output of every request's audio (what a person listens to when a check fails).

soundfile writes float WAVs when it is installed; otherwise the standard library ``wave`` module writes
16-bit PCM (the GPU machine has no soundfile). Either way the file plays in any audio player.
"""

from __future__ import annotations

import re
import wave
from pathlib import Path

import numpy as np

try:  # optional: float32 WAVs without clipping
    import soundfile as _sf
except Exception:  # noqa: BLE001 - absent or broken libsndfile: fall back to the stdlib
    _sf = None


def safe_name(part: str) -> str:
    """``part`` as one file name (a model spec like ``path/toys.py:two_stage`` holds slashes)."""
    return re.sub(r"[^A-Za-z0-9_.@+-]+", "_", part).strip("_") or "x"


def wav_path(root: Path, model: str, check: str, name: str) -> Path:
    return Path(root) / "wav" / safe_name(model) / safe_name(check) / f"{safe_name(name)}.wav"


def to_numpy(audio) -> np.ndarray:
    try:
        import torch

        if isinstance(audio, torch.Tensor):
            return audio.detach().to("cpu").float().reshape(-1).numpy()
    except ImportError:  # pragma: no cover
        pass
    return np.asarray(audio, dtype=np.float32).reshape(-1)


def write_wav(path: Path, audio, sample_rate: int) -> Path:
    """Write mono ``audio`` at ``sample_rate``; returns the path. Never raises for odd input lengths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = to_numpy(audio)
    data = np.nan_to_num(data, nan=0.0, posinf=1.0, neginf=-1.0)
    sr = int(sample_rate) if sample_rate and int(sample_rate) > 0 else 16000
    if _sf is not None:
        _sf.write(str(path), data, sr, subtype="FLOAT")
        return path
    pcm = (np.clip(data, -1.0, 1.0) * 32767.0).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(pcm.tobytes())
    return path


def read_wav(path: Path) -> tuple[np.ndarray, int]:
    """Read back a WAV written by :func:`write_wav` (used by the tests)."""
    if _sf is not None:
        data, sr = _sf.read(str(path), dtype="float32")
        return np.asarray(data).reshape(-1), int(sr)
    with wave.open(str(path), "rb") as w:
        raw = w.readframes(w.getnframes())
        return np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32767.0, w.getframerate()
