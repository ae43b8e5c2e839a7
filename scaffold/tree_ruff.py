"""Run a target tree's own ruff (the version its pre-commit config pins) with its own configuration.

Generated code must pass the target's lint from the first minute. Wheels carry no pyproject or
pre-commit config, so a wheel tree borrows them from the nearest release that ships sources
(0.20.0), which the caller passes as `config_root`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from omnitts.knowledge.releases import cache_lock, cache_root
from omnitts.scaffold.errors import ScaffoldError


def pinned_ruff_version(config_root: Path) -> str:
    text = (config_root / ".pre-commit-config.yaml").read_text(encoding="utf-8")
    match = re.search(r"astral-sh/ruff-pre-commit\s*\n\s*rev:\s*v?([0-9.]+)", text)
    if not match:
        raise ScaffoldError(f"{config_root}/.pre-commit-config.yaml pins no ruff-pre-commit revision")
    return match.group(1)


def ruff_executable(version: str) -> Path:
    """ruff==version installed once into the cache (pip --target keeps it out of every environment)."""
    target = cache_root() / "tools" / f"ruff-{version}"
    exe = target / "bin" / "ruff"
    if exe.exists():
        return exe
    with cache_lock(f"ruff-{version}"):  # parallel test workers install it once
        if not exe.exists():
            cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target)]
            proc = subprocess.run([*cmd, f"ruff=={version}"], capture_output=True, text=True)
            if proc.returncode != 0 or not exe.exists():
                last = (proc.stderr.strip().splitlines() or ["?"])[-1]
                raise ScaffoldError(f"could not install ruff=={version}: {last}")
    return exe


def run_tree_ruff(tree: Path, files: list[str], config_root: Path | None = None) -> tuple[int, str]:
    """`ruff check` + `ruff format --check` on `files` (relative to `tree`); returns (exit code, output)."""
    config_root = config_root or tree
    exe = ruff_executable(pinned_ruff_version(config_root))
    config = [
        "--config",
        str(config_root / "pyproject.toml"),
        "--config",
        'lint.isort.known-first-party = ["vllm_omni", "tests"]',
    ]
    py = [f for f in files if f.endswith(".py")]
    out, code = [], 0
    for cmd in (["check", "--no-cache", "--output-format", "concise"], ["format", "--no-cache", "--check", "--diff"]):
        proc = subprocess.run([str(exe), *cmd, *config, *py], cwd=tree, capture_output=True, text=True)
        code = code or proc.returncode
        out.append(proc.stdout + proc.stderr)
    return code, "\n".join(out)
