"""The generated run scripts listen on 127.0.0.1 unless HOST says otherwise (run with stand-in commands)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from omnitts.scaffold.naming import make_names, template_context
from omnitts.scaffold.render import render_shared

DIR = "examples/online_serving/text_to_speech/my_tts"


@pytest.fixture
def scripts(tmp_path):
    """The rendered scripts, and a PATH whose `vllm`, `curl` and `python` only record their arguments."""
    files = render_shared(template_context(make_names("my_tts", "two-stage")))
    out = tmp_path / "scripts"
    out.mkdir()
    for name in ("run_server.sh", "run_gradio_demo.sh"):
        (out / name).write_text(files[f"{DIR}/{name}"])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for tool in ("vllm", "curl", "python"):
        stub = bin_dir / tool
        stub.write_text(f'#!/bin/bash\necho "{tool} $*" >> "{log}"\n')
        stub.chmod(0o755)
    # the health check succeeds once the backgrounded server has started (recorded its call), as a real one would:
    # otherwise, under load, the script could reach its EXIT trap and kill the stub before it wrote its line
    (bin_dir / "curl").write_text(f'#!/bin/bash\necho "curl $*" >> "{log}"\ngrep -q "^vllm " "{log}"\n')
    return out, bin_dir, log, files


def _run(script: Path, bin_dir: Path, log: Path, **env) -> list[str]:
    log.write_text("")
    environ = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", **env}
    if "HOST" not in env:
        environ.pop("HOST", None)
    subprocess.run(["bash", str(script)], env=environ, check=True, capture_output=True, timeout=30)
    return log.read_text().splitlines()


def test_run_server_binds_loopback_unless_host_is_set(scripts):
    out, bin_dir, log, _ = scripts
    (call,) = _run(out / "run_server.sh", bin_dir, log)
    assert "--host 127.0.0.1 " in call
    (call,) = _run(out / "run_server.sh", bin_dir, log, HOST="0.0.0.0")
    assert "--host 0.0.0.0 " in call


def test_gradio_demo_binds_loopback_unless_host_is_set(scripts):
    out, bin_dir, log, _ = scripts
    calls = _run(out / "run_gradio_demo.sh", bin_dir, log)
    vllm = next(c for c in calls if c.startswith("vllm "))
    demo = next(c for c in calls if c.startswith("python "))
    assert "--host 127.0.0.1 " in vllm and "--host 127.0.0.1 " in demo
    assert any(c.startswith("curl ") and "http://127.0.0.1:8091/health" in c for c in calls)
    calls = _run(out / "run_gradio_demo.sh", bin_dir, log, HOST="0.0.0.0")
    assert any(c.startswith("vllm ") and "--host 0.0.0.0 " in c for c in calls)
    assert any(c.startswith("python ") and "--host 0.0.0.0 " in c and "http://127.0.0.1:8091" in c for c in calls)


def test_no_template_binds_every_interface_by_default(scripts):
    *_, files = scripts
    for rel, text in files.items():
        assert "--host 0.0.0.0" not in text and 'server_name="0.0.0.0"' not in text, rel
        assert "HOST:-0.0.0.0" not in text and 'default="0.0.0.0"' not in text, rel
    assert "server_name=args.host" in files[f"{DIR}/gradio_demo.py"]
    assert 'default="127.0.0.1"' in files[f"{DIR}/gradio_demo.py"]


def test_the_hub_section_documents_the_variable():
    text = (Path(__file__).resolve().parents[2] / "templates/snippets/online_section.md.j2").read_text()
    assert "`HOST=0.0.0.0`" in text
