"""Generated code passes ruff with vLLM-Omni 0.20.0's configuration (line length 120; E, W, F, I, N, UP, TID251),
for several model names and both targets. The vllm_omni render goes into a skeleton tree where ``vllm_omni`` is
first-party, as in a real checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from omnitts.reference_models import render_references

pytest.importorskip("cookiecutter")

# [tool.ruff] of vllm-omni 0.20.0's pyproject.toml
VLLM_OMNI_RUFF = """
[tool.ruff]
line-length = 120

[tool.ruff.lint]
select = ["E", "W", "F", "I", "N", "UP", "TID251"]
ignore = ["E203", "N801", "N802", "N806", "N812"]

[tool.ruff.lint.flake8-tidy-imports.banned-api]
"librosa".msg = "The librosa module is banned, use vllm.multimodal helpers instead"
"""


def _ruff() -> str:
    candidate = Path(sys.executable).parent / "ruff"
    found = str(candidate) if candidate.exists() else shutil.which("ruff")
    if not found:
        pytest.skip("ruff is not installed")
    return found


@pytest.mark.parametrize("pattern", ["two-stage", "single-stage", "native-ar"])
@pytest.mark.parametrize(
    "name,keys",
    [("my_tts", ("request_id",)), ("ming_flash_omni_tts", ("req_id", "request_id")), ("a", ("request_id",))],
)
def test_vllm_omni_render_passes_vllm_omni_ruff(pattern, name, keys, tmp_path):
    from omnitts.scaffold.naming import make_names, template_context

    ruff = _ruff()
    (tmp_path / "pyproject.toml").write_text(VLLM_OMNI_RUFF)
    out = tmp_path / "vllm_omni" / "model_executor"
    for pkg in (tmp_path / "vllm_omni", out, out / "models", out / "stage_input_processors"):
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text("")
    newest = "req_id" in keys  # render the way a 0.30 tree asks for (its processor keyword and return type)
    ctx = template_context(
        make_names(name, pattern),
        target="vllm_omni",
        request_id_keys=keys,
        chunk_payload_kwarg="multimodal_output" if newest else "pooling_output",
        chunk_payload_struct=newest,
    )
    render_references.render(pattern, ctx, out)
    for args in (["check"], ["format", "--check", "--diff"]):
        proc = subprocess.run(
            [ruff, *args, "--no-cache", "--config", "pyproject.toml", "vllm_omni"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_committed_references_pass_the_repo_ruff():
    ruff = _ruff()
    config = render_references.REFERENCE_DIR.parent / "pyproject.toml"  # the repo's ruff settings
    roots = [str(render_references.REFERENCE_DIR / name) for name in render_references.PATTERNS]
    for args in (["check"], ["format", "--check", "--diff"]):
        proc = subprocess.run(
            [ruff, *args, "--no-cache", "--config", str(config), *roots], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
