"""`python -m pytest -m engine` on a machine without Chromium, chromedriver or ffmpeg: the Gradio demo's browser
tests stop the session before any test runs, in one line that says what to install (they were 3 errors at setup).
The system's browser paths (tests/engine/demo_env.py) are replaced by a plugin that points them at files that exist
or do not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFTEST = REPO / "tests" / "engine" / "conftest.py"
PLUGIN = """
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path({root!r})
CONFTEST = Path({conftest!r})


@pytest.hookimpl(tryfirst=True)  # before the engine tests' conftest looks for the browser
def pytest_collection_modifyitems(config, items):
    (conftest,) = [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str(CONFTEST)]
    demo_env = importlib.import_module(".demo_env", conftest.__package__)  # the module the conftest imports
    names = ("chromium", "chromedriver", "ffmpeg")
    demo_env.CHROMIUM, demo_env.CHROMEDRIVER, demo_env.FFMPEG = (ROOT / n for n in names)
"""


def _collect(tmp_path: Path, present: tuple[str, ...], *args: str) -> subprocess.CompletedProcess:
    system = tmp_path / "usr-bin"
    system.mkdir()
    for name in present:
        (system / name).write_text("")
    (tmp_path / "fake_system_browser.py").write_text(PLUGIN.format(root=str(system), conftest=str(CONFTEST)))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "fake_system_browser", "-p", "no:xdist", "-q", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_missing_browser_stops_the_engine_session_in_one_line(tmp_path):  # INVALID
    proc = _collect(tmp_path, ("chromium", "chromedriver"), "-m", "engine", "tests/engine/test_gradio_demo.py")
    assert proc.returncode == 4, proc.stdout[-2000:] + proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR:")]
    assert errors == [
        "ERROR: tests/engine/test_gradio_demo.py: Chromium or ffmpeg not found "
        f"({tmp_path / 'usr-bin' / 'ffmpeg'}): apt-get install -y chromium chromium-driver ffmpeg, "
        "or deselect it with -k 'not gradio_demo'"
    ]
    assert "passed" not in proc.stdout and "error" not in proc.stdout.lower()


def test_present_browser_or_deselected_demo_collects(tmp_path):  # VALID
    present = _collect(
        tmp_path,
        ("chromium", "chromedriver", "ffmpeg"),
        "-m",
        "engine",
        "--collect-only",
        "tests/engine/test_gradio_demo.py",
    )
    assert present.returncode == 0, present.stderr[-2000:]
    assert "3 tests collected" in present.stdout
    (tmp_path / "usr-bin" / "ffmpeg").unlink()
    deselected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "fake_system_browser",
            "-p",
            "no:xdist",
            "-q",
            "-m",
            "engine",
            "--collect-only",
            "-k",
            "not gradio_demo",
            "tests/engine/test_gradio_demo.py",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert deselected.returncode in (0, 5), deselected.stderr[-2000:]  # 5: nothing selected, no usage error
    assert "ERROR:" not in deselected.stderr
