"""The cached environments' shared mechanics (``validators/engine/venvs.py``): built once, marked with the recipe's
fingerprint, a stale or unfinished build replaced, a failed step one error naming the step, parallel callers
served by one build."""

from __future__ import annotations

import json
import sys
import threading

import pytest

from omnitts.validators.engine.venvs import CachedVenv


class BuildError(RuntimeError):
    pass


def cached(tmp_path, fingerprint="recipe-1") -> CachedVenv:
    return CachedVenv(tmp_path / "venv", ".ready.json", fingerprint, "[test]", "test env", BuildError)


def build_with(cv: CachedVenv, calls: list, log):
    def build() -> dict:
        calls.append(cv.fingerprint)
        cv.create(0.01, "the test environment", log)
        cv.run("import check", [str(cv.python), "-c", "import sys"], log)
        return {"fingerprint": cv.fingerprint, "seconds": 0}

    return build


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNITTS_CACHE", str(tmp_path / "cache"))


def test_a_build_from_another_recipe_is_replaced(tmp_path):  # INVALID: a stale marker
    old = cached(tmp_path, "recipe-0")
    old.ensure(build_with(old, [], print), print, "ready")
    (old.path / "left-by-the-old-build").write_text("x")
    new, calls = cached(tmp_path, "recipe-1"), []
    assert new.ready() is None
    new.ensure(build_with(new, calls, print), print, "ready")
    assert calls == ["recipe-1"] and not (new.path / "left-by-the-old-build").exists()
    assert json.loads((new.path / ".ready.json").read_text())["fingerprint"] == "recipe-1"


def test_an_unfinished_build_without_python_is_started_over(tmp_path):  # INVALID: interrupted before the venv
    cv = cached(tmp_path)
    cv.path.mkdir(parents=True)
    (cv.path / "half").write_text("x")
    cv.ensure(build_with(cv, [], print), print, "ready")
    assert cv.python.exists() and not (cv.path / "half").exists()


def test_a_failing_step_is_one_error_naming_it_and_marks_nothing(tmp_path):  # INVALID
    cv = cached(tmp_path)

    def build() -> dict:
        cv.create(0.01, "the test environment", print)
        cv.run(
            "the step",
            [sys.executable, "-c", "import sys; print('why it failed', file=sys.stderr); sys.exit(3)"],
            print,
        )
        return {"fingerprint": cv.fingerprint, "seconds": 0}

    with pytest.raises(BuildError, match=r"^test env: the step failed \(exit 3\):\nwhy it failed$"):
        cv.ensure(build, print, "ready")
    assert cv.ready() is None and not (cv.path / ".ready.json").exists()


def test_too_little_disk_is_the_recipes_error(tmp_path):  # INVALID
    cv = cached(tmp_path)
    with pytest.raises(BuildError, match=r"^test env: the test environment needs about"):
        cv.create(10**9, "the test environment", print)
    assert not cv.path.exists()


def test_built_once_for_parallel_callers_then_ready(tmp_path):  # VALID: the lock, the marker
    cv, calls, errors, logged = cached(tmp_path), [], [], []
    assert cv.ready() is None

    def call():
        try:
            cv.ensure(build_with(cv, calls, logged.append), logged.append, "ready")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and calls == ["recipe-1"]
    assert cv.ready() == {"fingerprint": "recipe-1", "seconds": 0} and cv.python.exists()
    assert any(line.startswith("[test] import check: ") for line in logged)
    assert f"[test] ready in 0 s: {cv.path}" in logged
    cv.ensure(build_with(cv, calls, logged.append), logged.append, "ready")
    assert calls == ["recipe-1"]  # ready: not built again
