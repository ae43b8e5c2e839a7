"""docs/tutorial.md's route, as written, from a fresh virtual environment: every ```bash block marked
``<!-- route: omnitts -->`` (run in a copy of this checkout), ``<!-- route: tree -->`` (run in a git working copy of
the 0.30.0 release, the contributor's vLLM-Omni checkout) or ``<!-- route: tree background -->`` (started, and
stopped with Ctrl-C once the blocks after it ran), in order: install, scaffold, the generated tests, the harness
tier, the offline and server engine tiers, the linter, omnitts-serve + omnitts-probe.

The only change to the commands: the server's port 8091 becomes a free one; ``OMNITTS_ENGINE_TIMEOUT`` (1800 s)
lets an engine start wait for other users' engines on a shared machine. The engine environment comes from
``$OMNITTS_CACHE`` (built there on first use). Minutes to tens of minutes; each block's wall time is printed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import RELEASE

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "docs" / "tutorial.md"
PORT = "8091"
BLOCK = re.compile(r"<!-- route: (omnitts|tree|tree background) -->\n```bash\n(.*?)```", re.S)


def route() -> list[tuple[str, str]]:
    """(where, command block) in the tutorial's order."""
    return [(where, body.strip()) for where, body in BLOCK.findall(TUTORIAL.read_text(encoding="utf-8"))]


def test_the_tutorial_marks_the_whole_route():  # text only: runs in the quick tier, guards the route test's reach
    text = "\n".join(body for _, body in route())
    for step in (
        "pip install",
        "omnitts-scaffold new my_tts",
        "-- python -m pytest -q tests/model_executor/models/my_tts",
        "-- python -m omnitts.validators.validate",
        "--engine offline",
        "--engine server",
        "omnitts-lint",
        "omnitts-serve --model my_tts",
        "omnitts-probe",
    ):
        assert step in text, step
    assert [where for where, _ in route()].count("tree background") == 1


def _wait_for(path: Path, pattern: str, proc: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if re.search(pattern, text, re.M):
            return text
        if proc.poll() is not None:
            pytest.fail(f"the background command exited with {proc.returncode}:\n{text[-3000:]}")
        time.sleep(2)
    pytest.fail(f"no {pattern!r} after {timeout:.0f} s:\n{path.read_text()[-3000:] if path.exists() else ''}")


@pytest.mark.engine
@pytest.mark.slow
def test_tutorial_cpu_route_from_a_fresh_venv(tmp_path):
    from omnitts.knowledge.releases import working_copy
    from omnitts.validators.engine.runtime import free_port

    src = tmp_path / "omnitts"
    junk = shutil.ignore_patterns(".git", ".venv*", ".cache", "build", "dist", "*.egg-info", "__pycache__", "omnitts-*")
    shutil.copytree(REPO, src, ignore=junk)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # engine starts queue behind other engines on a shared machine (vLLM-Omni's device init lock)
        "OMNITTS_ENGINE_TIMEOUT": os.environ.get("OMNITTS_ENGINE_TIMEOUT", "1800"),
    }
    env.pop("PYTHONPATH", None)
    checkout = working_copy(RELEASE, tmp_path / "vllm-omni")  # the contributor's checkout: a git repo of the release
    port = str(free_port())
    background: subprocess.Popen | None = None
    background_log = tmp_path / "background.log"
    times: list[tuple[str, float]] = []
    try:
        for where, body in route():
            command = body.replace(PORT, port)
            cwd = src if where == "omnitts" else checkout
            started = time.monotonic()
            if where == "tree background":
                with background_log.open("w") as log:
                    background = subprocess.Popen(
                        ["bash", "-c", f"exec {command}"],
                        cwd=cwd,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                served = _wait_for(background_log, r"^model: my_tts$", background, timeout=1800)
                assert f"url: http://127.0.0.1:{port}" in served, served[-2000:]
            else:
                # -e: a block's every line must pass (the offline tier's failure once hid behind the server's exit 0)
                proc = subprocess.run(
                    ["bash", "-ec", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=3600
                )
                out = proc.stdout + proc.stderr
                assert proc.returncode == 0, f"{command}\n{out[-6000:]}"
                if "models/my_tts" in command and "pytest" in command:
                    assert re.search(r"^4 passed", proc.stdout, re.M), proc.stdout[-2000:]
                if "omnitts-probe" in command:
                    assert "FAIL" not in proc.stdout, proc.stdout[-3000:]
            lines = command.splitlines()
            label = lines[0][:90] + (f" (+{len(lines) - 1} more)" if len(lines) > 1 else "")
            times.append((label, round(time.monotonic() - started, 1)))
        assert background is not None
        os.killpg(background.pid, signal.SIGINT)  # Ctrl-C
        assert background.wait(timeout=120) == 0, background_log.read_text()[-3000:]
        assert "omnitts-serve: stopped" in background_log.read_text()
    finally:
        if background is not None and background.poll() is None:
            os.killpg(background.pid, signal.SIGKILL)
        for step, seconds in times:
            print(f"{seconds:8.1f} s  {step}")
        print(f"{sum(s for _, s in times):8.1f} s  the route")
