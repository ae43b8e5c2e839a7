"""The multi-GB environment builds check free disk first and fail in one line, before pip fills the disk."""

from __future__ import annotations

import shutil
from collections import namedtuple

import pytest

from omnitts.knowledge import releases
from omnitts.knowledge.references import reference
from omnitts.validators.engine import install, venvs
from omnitts.validators.parity import refenv

Usage = namedtuple("Usage", "total used free")
GIB = 2**30


def _free(monkeypatch, gib: float) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(100 * GIB, 0, int(gib * GIB)))


def test_enough_space_passes(monkeypatch, tmp_path):  # VALID
    _free(monkeypatch, 5.0)
    releases.require_free_space(tmp_path / "not" / "yet", 4.0, "a build")


def test_too_little_space_names_need_and_free(monkeypatch, tmp_path):  # INVALID
    _free(monkeypatch, 1.25)
    with pytest.raises(releases.CacheSpaceError) as err:
        releases.require_free_space(tmp_path / "venv", 4.0, "a build")
    message = str(err.value)
    assert "\n" not in message
    assert "a build needs about 4 GiB free" in message and "1.2 GiB is free" in message
    assert "OMNITTS_CACHE" in message


def test_engine_env_refuses_before_building(monkeypatch, tmp_path):
    monkeypatch.setenv("OMNITTS_CACHE", str(tmp_path))
    monkeypatch.delenv(install.ENGINE_PYTHON_VAR, raising=False)
    _free(monkeypatch, 0.5)
    ran = []
    monkeypatch.setattr(venvs.CachedVenv, "run", lambda *a, **k: ran.append(a))
    with pytest.raises(install.EngineEnvError, match=r"^engine env: the engine environment of vLLM-Omni 0\.30\.0"):
        install.ensure_engine_env("0.30.0", log=lambda msg: None)
    assert ran == []  # no venv, no pip
    assert not install.venv_dir("0.30.0").exists()


def test_reference_env_refuses_before_building(monkeypatch, tmp_path):
    monkeypatch.setenv("OMNITTS_CACHE", str(tmp_path))
    _free(monkeypatch, 0.5)
    ran = []
    monkeypatch.setattr(venvs.CachedVenv, "run", lambda *a, **k: ran.append(a))
    recipe = reference("qwen-tts")
    with pytest.raises(refenv.ReferenceEnvError, match=r"^reference env: the reference environment qwen-tts needs"):
        refenv.ensure_reference_env(recipe, log=lambda msg: None)
    assert ran == []
    assert not refenv.venv_dir(recipe).exists()
