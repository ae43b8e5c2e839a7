"""The capture format round-trips, declares its schema, and refuses what it cannot read; the adapter base class
imports nothing beyond the standard library (it runs inside the reference's own environment)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from omnitts.validators.parity.capture_file import (
    SCHEMA,
    CapturedRequest,
    CaptureError,
    checkpoint_fingerprint,
    read_capture,
    write_capture,
)


def _request(i: int) -> CapturedRequest:
    rng = np.random.default_rng(i)
    codes = rng.integers(0, 2048, size=(23, 4))
    wave = rng.standard_normal(44160).astype(np.float32)
    return CapturedRequest(f"r{i}", f"text {i}", {"speaker": "tiny"}, {"codes": codes, "waveform": wave}, 1.5)


def test_round_trip(tmp_path):
    reqs = [_request(0), _request(1)]
    write_capture(tmp_path / "cap", {"sample_rate": 24000, "dtype": "float32"}, reqs)
    manifest = json.loads((tmp_path / "cap" / "manifest.json").read_text())
    assert manifest["schema"] == SCHEMA
    assert manifest["requests"][0]["frames"] == 23 and manifest["requests"][0]["codebooks"] == 4
    cap = read_capture(tmp_path / "cap")
    assert cap.sample_rate == 24000 and cap.dtype == "float32"
    for want, got in zip(reqs, cap.requests, strict=True):
        assert got.id == want.id and got.text == want.text and got.params == want.params
        np.testing.assert_array_equal(got.codes, want.arrays["codes"])
        np.testing.assert_array_equal(got.waveform, want.arrays["waveform"])
    assert cap.request("r1").text == "text 1"


def test_other_schema_refused(tmp_path):
    write_capture(tmp_path, {"sample_rate": 1, "dtype": "float32"}, [_request(0)])
    data = json.loads((tmp_path / "manifest.json").read_text())
    data["schema"] = "omnitts.capture/2"
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(CaptureError, match="schema 'omnitts.capture/2'"):
        read_capture(tmp_path)


def test_missing_capture_and_missing_array(tmp_path):
    with pytest.raises(CaptureError, match="no manifest.json"):
        read_capture(tmp_path)
    write_capture(tmp_path, {"sample_rate": 1, "dtype": "float32"}, [_request(0)])
    np.savez(tmp_path / "arrays.npz", other=np.zeros(1))
    with pytest.raises(CaptureError, match="absent from arrays.npz"):
        read_capture(tmp_path)


def test_bad_request_id(tmp_path):
    req = _request(0)
    req.id = "a/b"
    with pytest.raises(CaptureError, match="contain no '/'"):
        write_capture(tmp_path, {}, [req])


def test_checkpoint_fingerprint_changes_with_weights(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"a")
    first = checkpoint_fingerprint(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"b")
    second = checkpoint_fingerprint(tmp_path)
    assert first["config_hash"] == second["config_hash"] and first["files"] != second["files"]


def test_adapter_module_imports_only_the_standard_library():
    code = (
        "import sys; import omnitts.validators.parity.adapter as a; "
        "heavy = sorted(m for m in ('numpy', 'torch', 'transformers', 'pytest', 'omnitts.knowledge') "
        "if m in sys.modules); print(heavy); assert not heavy, heavy"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
