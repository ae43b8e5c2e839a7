"""Format generated Python the way the target tree's pre-commit would (isort order + ruff format).

Template output depends on the model's name (line lengths, the import order of
`vllm_omni.model_executor.models.<name>` among its siblings), so generated files are passed through
ruff with the tree's own configuration before they enter the plan. Shared files patched by codemods
are never reformatted: their diff must stay additions only.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from omnitts.scaffold.errors import ScaffoldError

# Wheels carry no pyproject.toml; vLLM-Omni's own settings (0.14-0.30 all use these) stand in.
FALLBACK_CONFIG = ["line-length = 120", 'lint.isort.known-first-party = ["vllm_omni", "tests"]']


def _ruff() -> list[str]:
    exe = shutil.which("ruff")
    if exe:
        return [exe]
    try:
        import ruff  # noqa: F401  (the PyPI package ships the binary; `python -m ruff` finds it)
    except ImportError:
        raise ScaffoldError("ruff is not installed; it is a dependency of omnitts (pip install ruff)") from None
    return [sys.executable, "-m", "ruff"]


def format_python(files: dict[str, str], tree: Path) -> dict[str, str]:
    """Return `files` with every `.py` entry isort-fixed and ruff-formatted under the tree's config."""
    py = {rel: text for rel, text in files.items() if rel.endswith(".py")}
    if not py:
        return files
    config: list[str] = []
    pyproject = tree / "pyproject.toml"
    if pyproject.is_file() and "[tool.ruff" in pyproject.read_text(encoding="utf-8"):
        config += ["--config", str(pyproject), "--config", FALLBACK_CONFIG[1]]
    else:
        for setting in FALLBACK_CONFIG:
            config += ["--config", setting]
    with tempfile.TemporaryDirectory(prefix="omnitts-format-") as tmp:
        base = Path(tmp)
        for rel, text in py.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text, encoding="utf-8")
        rels = sorted(py)
        for args in (
            ["check", "--fix-only", "--select", "I", "--no-cache", "--quiet"],
            ["format", "--no-cache", "--quiet"],
        ):
            proc = subprocess.run([*_ruff(), *args, *config, *rels], cwd=base, capture_output=True, text=True)
            if proc.returncode != 0:
                detail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[:1] or ["?"]
                raise ScaffoldError(f"internal error: ruff could not format the generated code: {detail[0]}")
        return {**files, **{rel: (base / rel).read_text(encoding="utf-8") for rel in rels}}
