"""Decoding what a speech server answers: raw 16-bit PCM, and every response format (lossy ones with PyAV, here or
in another Python that has it)."""

from __future__ import annotations

import io

import numpy as np


def pcm(body: bytes) -> np.ndarray:
    """Raw 16-bit little-endian mono PCM as float32 in [-1, 1)."""
    return np.frombuffer(body[: len(body) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0


# What each response format's body starts with, as vLLM-Omni's speech route writes it (soundfile formats of
# audio_utils_mixin.py's `supported_formats`: WAV, RAW, FLAC, MP3, OGG/OPUS, and AAC where a release offers it).
CONTAINERS = {
    "wav": "a RIFF/WAVE header",
    "flac": "the fLaC marker",
    "mp3": "an ID3 tag or an MPEG audio frame",
    "opus": "an Ogg page holding OpusHead",
    "aac": "an ADTS frame, ADIF or an MP4 ftyp box",
    "pcm": "raw 16-bit samples: no container header, whole samples",
}


def _skip_id3(body: bytes) -> bytes:
    """The body after an ID3v2 tag (a FLAC, MP3 or AAC file may open with one)."""
    if body[:3] == b"ID3" and len(body) >= 10:
        size = (body[6] & 0x7F) << 21 | (body[7] & 0x7F) << 14 | (body[8] & 0x7F) << 7 | (body[9] & 0x7F)
        return body[10 + size + (10 if body[5] & 0x10 else 0) :]
    return body


def sniff(body: bytes) -> str | None:
    """The container a body's first bytes show (None: none known; raw PCM shows none)."""
    if body[:4] in (b"RIFF", b"RF64", b"RIFX") and body[8:12] == b"WAVE":
        return "wav"
    if body[:4] == b"OggS":
        return "opus" if b"OpusHead" in body[:512] else "ogg"
    if body[:4] == b"ADIF" or body[4:8] == b"ftyp":
        return "aac"
    rest = _skip_id3(body)
    if rest[:4] == b"fLaC":
        return "flac"
    if len(rest) >= 2 and rest[0] == 0xFF and rest[1] & 0xE0 == 0xE0:
        return "aac" if rest[1] & 0x06 == 0 else "mp3"  # layer bits 00: ADTS (AAC); else MPEG audio layer I-III
    return "mp3" if body[:3] == b"ID3" else None


def container_problem(fmt: str, body: bytes) -> str | None:
    """Why ``body`` is not a ``fmt`` answer (None: it is, or the format is not one the route writes)."""
    if fmt not in CONTAINERS:
        return None
    found = sniff(body)
    if fmt == "pcm":
        if found in ("wav", "flac", "opus", "ogg"):  # an MP3/AAC sync word may open raw samples by chance
            return f"pcm answered with a {found} container (raw 16-bit samples expected)"
        return f"pcm body of {len(body)} bytes: not whole 16-bit samples" if len(body) % 2 else None
    if found == fmt:
        return None
    what = f"a {found} container" if found else f"no {fmt} container ({body[:12]!r}...)"
    return f"{fmt} answered with {what}; a {fmt} body starts with {CONTAINERS[fmt]}"


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
