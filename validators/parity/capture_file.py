"""The capture format: a folder with ``manifest.json`` (schema ``omnitts.capture/1``) and ``arrays.npz``.

Written by the capture command inside the reference's environment and read by the checks in the tree's; both
sides import only this module and numpy. The manifest declares everything needed to judge a comparison without
the reference at hand: what produced the capture (adapter, package versions, dtype, device, greedy or seed), which
checkpoint (the sha256 of its config files and of its weights), the sample rate, and per request its text and
fields, frame and codebook counts and the names of its arrays in ``arrays.npz``:

* ``<id>/codes``: int64 ``[frames, codebooks]`` (codebook 0 first), for a code model;
* ``<id>/latents``: float32 ``[frames, dim]``, for a latent model;
* ``<id>/waveform``: float32 ``[samples]``, what ``generate`` returned;
* ``<id>/decoded``: float32, the reference's decoder alone on ``<id>/codes`` (equal to the waveform for a
  reference whose generate decodes the same way; recorded so the decoder-alone check needs no reference);
* ``<id>/topk``: int64 ``[frames, codebooks, k]``, the teacher-forced top-k (when the adapter supports it);
* ``<id>/t/<name>``: optional intermediate tensors, float32.

A reader refuses a manifest of another schema major version with a one-line error.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCHEMA = "omnitts.capture/1"
MANIFEST = "manifest.json"
ARRAYS = "arrays.npz"
# Checkpoint files whose content identifies the model: configs hashed one by one; weights hashed too, so a capture
# is never compared against another random draw of the same config.
CONFIG_FILES = ("config.json", "generation_config.json", "speech_tokenizer/config.json")


class CaptureError(ValueError):
    """A capture that cannot be read: missing, another schema, or inconsistent with its arrays."""


@dataclass
class CapturedRequest:
    id: str
    text: str
    params: dict[str, Any]
    arrays: dict[str, Any]  # name (codes, latents, waveform, decoded, topk, t/<name>) -> numpy array
    wall_s: float = 0.0

    @property
    def codes(self):
        return self.arrays.get("codes")

    @property
    def latents(self):
        return self.arrays.get("latents")

    @property
    def waveform(self):
        return self.arrays.get("waveform")

    def reference_side(self) -> dict[str, Any]:
        """The ``ref_*`` fields of a ``ParityRequest`` for this request: what every parity backend compares against."""
        a = self.arrays
        return {
            "request": self.id,
            "text": self.text,
            "ref_waveform": a.get("waveform"),
            "ref_codes": a.get("codes"),
            "ref_latents": a.get("latents"),
            "ref_decoded": a.get("decoded"),
            "ref_topk": a.get("topk"),
        }


@dataclass
class Capture:
    manifest: dict[str, Any]
    requests: list[CapturedRequest] = field(default_factory=list)
    folder: Path | None = None  # where it was read from

    @property
    def sample_rate(self) -> int:
        return int(self.manifest["sample_rate"])

    @property
    def dtype(self) -> str:
        return str(self.manifest["dtype"])

    def request(self, request_id: str) -> CapturedRequest:
        for req in self.requests:
            if req.id == request_id:
                return req
        raise KeyError(request_id)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def checkpoint_fingerprint(model_dir: Path) -> dict[str, Any]:
    """sha256 of the checkpoint's config files and of every ``*.safetensors`` (relative path -> digest), and one
    ``config_hash`` over the config files alone (what a check prints when two captures disagree on the model)."""
    model_dir = Path(model_dir)
    files = {}
    for rel in CONFIG_FILES:
        if (model_dir / rel).is_file():
            files[rel] = file_digest(model_dir / rel)
    for path in sorted(model_dir.rglob("*.safetensors")):
        files[path.relative_to(model_dir).as_posix()] = file_digest(path)
    config_hash = hashlib.sha256(
        json.dumps({k: v for k, v in files.items() if k in CONFIG_FILES}, sort_keys=True).encode()
    ).hexdigest()
    return {"config_hash": config_hash, "files": files}


def write_capture(out: Path, manifest: dict[str, Any], requests: list[CapturedRequest]) -> Path:
    """Write ``out/manifest.json`` and ``out/arrays.npz``; the manifest gets the schema and per-request entries."""
    import numpy as np

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, Any] = {}
    entries = []
    for req in requests:
        if "/" in req.id or not req.id:
            raise CaptureError(f"request id {req.id!r}: must be non-empty and contain no '/'")
        names = {}
        for name, value in req.arrays.items():
            if value is None:
                continue
            array = np.asarray(value)
            key = f"{req.id}/{name}"
            arrays[key] = array
            names[name] = {"key": key, "shape": list(array.shape), "dtype": str(array.dtype)}
        codes = req.arrays.get("codes")
        frames_of = codes if codes is not None else req.arrays.get("latents")
        entries.append(
            {
                "id": req.id,
                "text": req.text,
                "params": req.params,
                "frames": int(np.asarray(frames_of).shape[0]) if frames_of is not None else 0,
                "codebooks": int(np.asarray(codes).shape[1]) if codes is not None else None,
                "samples": int(np.asarray(req.arrays["waveform"]).size),
                "wall_s": round(req.wall_s, 3),
                "arrays": names,
            }
        )
    full = {"schema": SCHEMA, **manifest, "requests": entries}
    np.savez(out / ARRAYS, **arrays)
    (out / MANIFEST).write_text(json.dumps(full, indent=1, sort_keys=False) + "\n")
    return out


def read_capture(path: Path) -> Capture:
    """The capture in the folder ``path`` (or the folder of the manifest ``path`` names)."""
    import numpy as np

    path = Path(path)
    folder = path.parent if path.name == MANIFEST else path
    if not (folder / MANIFEST).is_file():
        raise CaptureError(f"{path}: no {MANIFEST} (a capture is a folder written by omnitts-capture)")
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except ValueError as exc:
        raise CaptureError(f"{folder / MANIFEST}: not JSON ({exc})") from None
    schema = str(manifest.get("schema", ""))
    if schema.split("/")[0] != SCHEMA.split("/")[0] or schema.split("/")[-1].split(".")[0] != "1":
        raise CaptureError(f"{folder / MANIFEST}: schema {schema!r}, this omnitts reads {SCHEMA}")
    with np.load(folder / ARRAYS) as data:
        stored = {key: data[key] for key in data.files}
    requests = []
    for entry in manifest.get("requests", []):
        arrays = {}
        for name, ref in entry.get("arrays", {}).items():
            if ref["key"] not in stored:
                raise CaptureError(f"{folder}: request {entry['id']!r} names {ref['key']!r}, absent from {ARRAYS}")
            arrays[name] = stored[ref["key"]]
        requests.append(CapturedRequest(entry["id"], entry["text"], entry.get("params", {}), arrays, entry["wall_s"]))
    return Capture(manifest, requests, folder)
