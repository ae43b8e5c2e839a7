"""Render the cookiecutter templates in `templates/` into memory.

Cookiecutter renders a template folder to disk; we render into a private temp folder and read the
files back, so that rendering never touches the target tree (the plan decides what is written).
Code that several templates share lives once, as Jinja macros in `templates/blocks/`; each render
gets them as the template's `templates/` folder, where cookiecutter's loader finds `{% from %}` /
`{% include %}` targets.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from cookiecutter.main import cookiecutter

from omnitts.scaffold.errors import ScaffoldError


def templates_root() -> Path:
    import omnitts.templates as package  # a plain folder of data; no import-time work

    return Path(next(iter(package.__path__)))


def _render(template_dir: Path, ctx: dict[str, str]) -> dict[str, str]:
    if not (template_dir / "cookiecutter.json").is_file():
        raise ScaffoldError(f"internal error: template {template_dir} has no cookiecutter.json")
    with tempfile.TemporaryDirectory(prefix="omnitts-render-") as tmp:
        repo = Path(tmp) / "template"
        no_cache = shutil.ignore_patterns("__pycache__")
        shutil.copytree(template_dir, repo, ignore=no_cache)
        blocks = templates_root() / "blocks"
        if blocks.is_dir():
            shutil.copytree(blocks, repo / "templates", ignore=no_cache)
        try:
            out = cookiecutter(
                str(repo),
                no_input=True,
                extra_context=ctx,
                output_dir=str(Path(tmp) / "out"),
                overwrite_if_exists=True,
                accept_hooks=False,
            )
        except Exception as exc:  # cookiecutter wraps Jinja errors in its own types
            reason = str(exc) or type(exc).__name__  # some cookiecutter exceptions carry no message
            raise ScaffoldError(f"internal error: rendering {template_dir.name} failed: {reason}") from exc
        base = Path(out)
        files = {}
        for path in sorted(base.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                text = path.read_text(encoding="utf-8")
                if text.strip():  # templates render to empty text for files a pattern does not need
                    files[path.relative_to(base).as_posix()] = text
        return files


def render_pattern(pattern: str, ctx: dict[str, str], out_dir: Path | None = None) -> dict[str, str]:
    """Model package + stage input processor of `pattern`, keyed by path below `vllm_omni/model_executor/`.

    With `out_dir`, the files are also written there (used to regenerate the reference models).
    """
    files = _render(templates_root() / "patterns" / pattern, ctx)
    if out_dir is not None:
        for rel, text in files.items():
            path = Path(out_dir) / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return files


def render_shared(ctx: dict[str, str]) -> dict[str, str]:
    """Pipeline, deploy yaml, examples and tests, keyed by path below the tree root."""
    return _render(templates_root() / "shared", ctx)


def with_stage_args_topology(files: dict[str, str], names, ctx: dict[str, str]) -> dict[str, str]:
    """The legacy stage_configs era (0.18): the model's topology is `stage_configs/<model_type>.yaml`
    (`stage_args:` schema, `templates/legacy/`), which replaces the pipeline.py and deploy yaml."""
    from jinja2 import Environment, StrictUndefined

    from omnitts.knowledge import layout

    drop = {f"{layout.MODELS}/{names.name}/pipeline.py", f"{layout.DEPLOY}/{names.model_type}.yaml"}
    out = {rel: text for rel, text in files.items() if rel not in drop}
    env = Environment(undefined=StrictUndefined, keep_trailing_newline=True)
    template = env.from_string((templates_root() / "legacy" / "stage_config.yaml.j2").read_text(encoding="utf-8"))
    out[f"{layout.STAGE_CONFIGS}/{names.model_type}.yaml"] = template.render(**ctx)
    return out
