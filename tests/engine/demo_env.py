"""Test support of tests/engine/test_gradio_demo.py: build (once, cached) the environment that runs the scaffold's
Gradio demo and drives it in Chromium.

The generated demo is a client of the server (Gradio + httpx, no vLLM), so it gets its own small virtual
environment instead of the engine's: Gradio's pins (fastapi, pydantic, numpy...) must not move the engine
environment under vLLM. ``$OMNITTS_CACHE/demo-venv-<fingerprint>`` holds Gradio and Selenium from PyPI;
the browser is Debian's ``chromium`` with ``chromium-driver`` (nothing is downloaded at run time: Selenium is
given the driver's path, so its driver manager never runs). Built under a cache lock, import-checked, and
marked ready only then.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from omnitts.knowledge.releases import cache_lock, cache_root

# Pinned so a cached environment is reproducible; bumping a pin rebuilds it (the fingerprint changes).
DEMO_PINS = ("gradio==6.31.0", "selenium==4.51.0")
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FFMPEG = Path("/usr/bin/ffmpeg")  # Gradio's streaming audio output encodes with it
DEBIAN_PACKAGES = ("chromium", "chromium-driver", "ffmpeg")
READY = ".omnitts-demo-ready.json"
SMOKE = "import gradio, httpx, numpy, selenium.webdriver; print(gradio.__version__)"


class DemoEnvError(RuntimeError):
    """The demo environment or the browser is missing; the message says what to install."""


def fingerprint() -> str:
    return hashlib.sha256("\n".join(DEMO_PINS).encode()).hexdigest()[:12]


def venv_dir() -> Path:
    return cache_root() / f"demo-venv-{fingerprint()}"


def _ready(venv: Path) -> bool:
    try:
        info = json.loads((venv / READY).read_text())
    except (OSError, ValueError):
        return False
    return info.get("pins") == list(DEMO_PINS) and (venv / "bin" / "python").exists()


def _run(step: str, cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise DemoEnvError(f"demo env: {step} failed (exit {proc.returncode}):\n{tail}")


def ensure_demo_env() -> Path:
    """The python of the ready demo environment, building it first if needed (parallel-safe)."""
    venv = venv_dir()
    if _ready(venv):
        return venv / "bin" / "python"
    with cache_lock(venv.name):
        if not _ready(venv):
            started = time.monotonic()
            shutil.rmtree(venv, ignore_errors=True)
            _run("venv", [sys.executable, "-m", "venv", str(venv)])
            py = venv / "bin" / "python"
            _run(
                "gradio and selenium",
                [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *DEMO_PINS],
            )
            _run("import check", [str(py), "-c", SMOKE])
            info = {"pins": list(DEMO_PINS), "seconds": round(time.monotonic() - started)}
            (venv / READY).write_text(json.dumps(info))
    return venv / "bin" / "python"


def browser() -> tuple[Path, Path]:
    """(chromium, chromedriver) from Debian's packages, and ffmpeg for the demo; fails closed with the install
    line when one is absent."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER, FFMPEG) if not p.is_file()]
    if missing:
        raise DemoEnvError(
            f"Chromium or ffmpeg not found ({', '.join(missing)}): apt-get install -y {' '.join(DEBIAN_PACKAGES)}"
        )
    return CHROMIUM, CHROMEDRIVER


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="omnitts-demo-env", description=__doc__.splitlines()[0]).parse_args(argv)
    try:
        print(ensure_demo_env())
        browser()
    except DemoEnvError as exc:
        print(f"omnitts-demo-env: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
