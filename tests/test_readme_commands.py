"""The README's commands work as written from a fresh virtual environment (issue: the quick tier needed
pytest-xdist that nothing installed). Each ```bash block of README.md runs, in order, in one fresh venv, then
the quick tier given inline after them
(its bin/ first on PATH, so `python3` is the venv's), from a clean copy of this checkout.

Installs and the scaffold command run verbatim. The pytest invocations get `--collect-only -q` appended:
their plugins and options (`-n 2` needs pytest-xdist, `-m "not slow"` the marker) must work, while running
the whole suite inside the suite is left to `.ci/run`, which runs the test command verbatim.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def readme_commands() -> list[str]:
    """The set-up commands: every line of the README's ```bash blocks."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def quick_tier_command() -> str:
    """The quick tier, given inline after the tests' set-up command (it needs that command's install)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.findall(r"`(python3 -m pytest [^`]*-m \"not slow\"[^`]*)`", text)
    assert len(found) == 1, found
    return found[0]


def _collect_only(command: str) -> str:
    """`python3 -m pytest ARGS` -> `python3 -m pytest ARGS --collect-only -q` in each `&&` part."""
    parts = [p.strip() for p in command.split("&&")]
    return " && ".join(p + " --collect-only -q" if re.match(r"python3? -m pytest\b", p) else p for p in parts)


def test_readme_has_exactly_the_two_setup_commands():
    cmds = readme_commands()
    assert len(cmds) == 2, cmds
    assert "omnitts-scaffold new" in cmds[0]
    assert "[test]" in cmds[1] and "-n 2" in cmds[1], "the tests' command installs what its -n needs"
    assert "-n 2" in quick_tier_command()


def test_readme_commands_from_a_fresh_venv(tmp_path):
    src = tmp_path / "omnitts"
    junk = shutil.ignore_patterns(".git", ".venv*", ".cache", "build", "dist", "*.egg-info", "__pycache__")
    shutil.copytree(REPO, src, ignore=junk)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {
        **os.environ,
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    env.pop("PYTHONPATH", None)
    for command in [*readme_commands(), quick_tier_command()]:  # the quick tier runs after the tests' install
        run = _collect_only(command)
        proc = subprocess.run(["bash", "-c", run], cwd=src, env=env, capture_output=True, text=True, timeout=1800)
        assert proc.returncode == 0, f"{run}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        if "omnitts-scaffold new" in command:
            assert "file(s) created" in proc.stderr and "next steps" in proc.stderr
        if "-n 2" in command:
            assert "error" not in proc.stderr.lower() or "collected" in proc.stdout, proc.stderr[-2000:]
    where = subprocess.run(
        ["python3", "-c", "import omnitts, sys; print(sys.prefix)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.stdout.strip() == str(venv)
