"""The scaffold's generated Gradio demo against the server tier, driven in headless Chromium as a person would.

One single-stage model scaffolded into 0.30.0, the tree's own `vllm-omni serve` on 127.0.0.1 (h8's `Server`),
the generated `gradio_demo.py` run from the scaffolded tree in the demo environment (Gradio from PyPI, cached),
and Debian's Chromium: the page loads, Speak streams from the server and the browser plays it. Everything is
started and stopped here. Set OMNITTS_DEMO_SCREENSHOT=PATH to keep the screenshot (benchmarks/results/ holds
one from a real run).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from .conftest import RELEASE, scaffold

pytestmark = pytest.mark.engine

MODEL = "tiny_demo"
DEMO = Path("examples/online_serving/text_to_speech") / MODEL / "gradio_demo.py"
BROWSER = Path(__file__).resolve().parent / "browser.py"
TEXT = "Streaming speech from the scaffold's demo."
SPEECH_LINE = '"POST /v1/audio/speech HTTP/1.1" 200'


@pytest.fixture(scope="module")
def demo_python() -> Path:
    from .demo_env import browser, ensure_demo_env

    browser()  # fails closed, with the apt-get line, when Chromium is missing
    return ensure_demo_env()


@pytest.fixture(scope="module")
def served(tmp_path_factory, engine_python):
    """(tree, model_dir, server): the scaffolded tree's own server, up for this module, always stopped."""
    from omnitts.validators.engine.runtime import EngineEnv, Server

    tmp = tmp_path_factory.mktemp("demo")
    tree = scaffold(tmp, "single-stage", MODEL)
    env = EngineEnv.prepare(tree, RELEASE, tmp)
    model_dir = env.model_dir(MODEL, tmp / "model")
    server = Server(env, model_dir, tmp / "server.log").start()
    try:
        yield tree, model_dir, server
    finally:
        server.stop()


def _demo_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(GRADIO_ANALYTICS_ENABLED="False", GRADIO_SERVER_NAME="127.0.0.1", NO_PROXY="127.0.0.1,localhost")
    return env


def test_demo_stream_decodes_to_the_servers_audio(served, demo_python, tmp_path):
    """The demo's streaming client yields the same samples the server gives for the whole request (on 0.30 a
    `"stream": true` answer is SSE; read as raw PCM it was base64 text played as noise)."""
    from omnitts.validators.backends.http import send

    tree, model_dir, server = served
    out = tmp_path / "streamed.pcm"
    script = (
        "import sys, numpy as np; sys.path.insert(0, sys.argv[1]); import gradio_demo as d\n"
        "chunks = [c for _, c in d.stream_speech(sys.argv[2], sys.argv[3], sys.argv[4])]\n"
        "assert chunks, 'no chunk streamed'\n"
        "np.concatenate(chunks).astype('<i2').tofile(sys.argv[5])\n"
    )
    proc = subprocess.run(
        [str(demo_python), "-c", script, str((tree / DEMO).parent), server.url, str(model_dir), TEXT, str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_demo_env(),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    streamed = np.fromfile(out, dtype="<i2")
    answer = send(
        server.url,
        "POST",
        "/v1/audio/speech",
        {"model": str(model_dir), "input": TEXT, "response_format": "pcm"},
        timeout=120,
    )
    status, body = answer.status, answer.body
    assert status == 200, body[:500]
    whole = np.frombuffer(body, dtype="<i2")
    assert len(streamed) == len(whole), f"streamed {len(streamed)} samples, whole request {len(whole)}"
    assert np.abs(streamed.astype(np.int32) - whole.astype(np.int32)).max() <= 1
    assert np.abs(whole).max() > 0, "the server answered silence"


def test_demo_without_ffmpeg_says_so_at_start(served, demo_python, tmp_path):
    """Gradio's streaming audio output needs ffmpeg: without it the page loaded and every Speak ended in a bare
    "Error". The demo now refuses to start, with a one-line reason."""
    tree, model_dir, server = served
    env = _demo_env()
    env["PATH"] = str(tmp_path)  # an empty folder: no ffmpeg (the demo is started by its interpreter's path)
    proc = subprocess.run(
        [str(demo_python), str(tree / DEMO), "--api-base", server.url, "--model", str(model_dir), "--port", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode != 0
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .endswith("streaming playback needs ffmpeg on PATH (e.g. apt-get install ffmpeg)")
    )


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the Gradio demo exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(OSError, urllib.error.URLError):
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        time.sleep(0.5)
    pytest.fail(f"the Gradio demo did not answer on {url} in {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def test_demo_loads_streams_and_plays_in_chromium(served, demo_python, tmp_path):
    from omnitts.validators.backends.http import send
    from omnitts.validators.engine.runtime import free_port

    from .demo_env import browser

    tree, model_dir, server = served
    chromium, chromedriver = browser()
    port = free_port()
    log = tmp_path / "gradio.log"
    requests_before = server.log.read_text().count(SPEECH_LINE)
    with log.open("w") as fh:
        demo = subprocess.Popen(
            [
                str(demo_python),
                str(tree / DEMO),
                "--api-base",
                server.url,
                "--model",
                str(model_dir),
                "--port",
                str(port),
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=_demo_env(),
            cwd=tmp_path,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_http(url, demo, log, timeout=120)
        shot, report_file = tmp_path / "gradio_demo.png", tmp_path / "browser.json"
        proc = subprocess.run(
            [
                str(demo_python),
                str(BROWSER),
                "--url",
                url,
                "--text",
                TEXT,
                "--screenshot",
                str(shot),
                "--report",
                str(report_file),
                "--profile",
                str(tmp_path / "chromium-profile"),
                "--chromium",
                str(chromium),
                "--chromedriver",
                str(chromedriver),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=_demo_env(),
        )
        assert report_file.is_file(), f"no browser report:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        report = json.loads(report_file.read_text())
        print(json.dumps(report, indent=1)[:4000])
        assert "error" not in report, (
            f"{report['error']}\n{report.get('traceback', '')}\ndemo log:\n{log.read_text()[-2000:]}"
        )
        assert report["title"], "the page has no title"
        assert "demo_error" not in report, (
            f"the page shows {report['demo_error']}; demo log:\n{log.read_text()[-2000:]}"
        )
        played = report["played"]
        assert played, f"no <audio> got a source and played: {report['audio']}\ndemo log:\n{log.read_text()[-2000:]}"
        assert played["currentSrc"] and played["error"] is None, played
        assert played["played"] > 0 or played["ended"], played
        # What the browser decoded lasts as long as the server's audio for the text (Gradio re-encodes it as
        # mp3, whose padding is a few tens of ms): noise from a misread stream would be ~40 % longer.
        body = {"model": str(model_dir), "input": TEXT, "response_format": "wav"}
        answer = send(server.url, "POST", "/v1/audio/speech", body, timeout=120)
        status, body = answer.status, answer.body
        assert status == 200, body[:500]
        expected = sf.info(io.BytesIO(body)).duration
        assert played["duration"] is not None and abs(played["duration"] - expected) <= max(0.15, 0.1 * expected), (
            f"the browser's audio lasts {played['duration']} s, the server's {expected:.3f} s"
        )
        assert shot.is_file() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
        assert server.log.read_text().count(SPEECH_LINE) > requests_before, (
            "the demo's request never reached the server"
        )
        keep = os.environ.get("OMNITTS_DEMO_SCREENSHOT")
        if keep:
            Path(keep).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shot, keep)
            (Path(keep).with_suffix(".json")).write_text(json.dumps(report, indent=1))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(demo.pid, signal.SIGTERM)
        try:
            demo.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.wait(timeout=10)
