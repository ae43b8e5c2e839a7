"""The models a change touches, for the integration hook: pre-commit passes the changed files (or git's
staged files are read), and the tree-scope rules report only findings that involve those models.

A file belongs to a model when it lies in the model's package, is its stage input processor or TTS
adapter, one of its example folders, or a deploy / stage config of its pipeline. A changed shared file
(registries, serving, hub READMEs) names the models its changed lines mention (from git's staged diff);
a changed tree input the rules read directly (a config, a consolidation module) is judged itself.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from omnitts.knowledge import treefacts as tf
from omnitts.knowledge.treefacts import TreeContext


def staged_files(root: Path) -> list[str]:
    """Paths (relative to ``root``) git has staged for the next commit; deleted files excluded."""
    proc = subprocess.run(
        ["git", "diff", "--cached", "--name-only", "--diff-filter=ACMR", "--relative", "-z"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git could not list the staged files in {root}: {proc.stderr.strip() or proc.returncode}")
    return [p for p in proc.stdout.split("\0") if p]


def _staged_lines(root: Path, rel: str) -> str:
    """The added and removed lines of a staged file ('' when git cannot tell: then no model is inferred)."""
    proc = subprocess.run(
        ["git", "diff", "--cached", "-U0", "--no-color", "--", rel], cwd=root, capture_output=True, text=True
    )
    if proc.returncode != 0:
        return ""
    return "\n".join(
        line[1:] for line in proc.stdout.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


def _model_names(ctx: TreeContext) -> set[str]:
    models = ctx.root / ctx.dir("models")
    return (
        {p.name for p in models.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
        if models.is_dir()
        else set()
    )


def touched_models(ctx: TreeContext, rels: list[str], diff=_staged_lines) -> set[str]:
    """Model package names the changed files (relative to the tree root) belong to or mention."""
    from omnitts.knowledge import configs

    known = _model_names(ctx)
    models_dir = ctx.dir("models") + "/"
    out: set[str] = set()
    shared: list[str] = []
    for rel in rels:
        parts = Path(rel).parts
        name = None
        if rel.startswith(models_dir) and len(parts) > len(Path(models_dir).parts) + 1:
            name = parts[len(Path(models_dir).parts)]
        elif rel.startswith((ctx.dir("stage_input_processors") + "/", tf.TTS_ADAPTERS + "/")):
            name = Path(rel).stem
        elif rel.startswith((tf.EXAMPLES_OFFLINE + "/", tf.EXAMPLES_ONLINE + "/")) and len(parts) > 3:
            name = parts[3] if parts[2] == tf.TTS_HUB and len(parts) > 4 else parts[2]
        elif rel.startswith((ctx.dir("deploy") + "/", ctx.dir("stage_configs") + "/")) and rel.endswith(
            (".yaml", ".yml")
        ):
            cfg = configs.load_config(ctx, rel) if (ctx.root / rel).is_file() else None
            pipe = configs.pipeline_for(ctx, rel, cfg) if cfg is not None and not cfg.legacy else None
            name = Path(pipe.path).parent.name if pipe is not None else Path(rel).stem
        if name in known:
            out.add(name)
        elif name is None or rel.endswith(".md"):
            shared.append(rel)
    for rel in shared:
        text = diff(ctx.root, rel)
        if text:
            words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
            out |= known & words
    return out


def change_focus(ctx: TreeContext, rels: list[str], diff=_staged_lines) -> tuple[set[str], set[str]]:
    """(models touched, tree files the tree-scope rules may report on): each touched model's configs,
    pipeline, examples and the consolidation modules (api.model_focus), plus the changed files themselves."""
    from omnitts.validators.static.api import model_focus

    models = touched_models(ctx, rels, diff)
    focus = set(rels)
    for name in sorted(models):
        focus |= model_focus(ctx.root / ctx.dir("models") / name, ctx.root)
    return models, focus


def relative_to_root(paths: list[str], root: Path) -> list[str]:
    """Changed paths as pre-commit passes them (relative to the repo root = cwd), made relative to ``root``."""
    out = []
    for p in paths:
        absp = Path(os.path.abspath(p))
        try:
            out.append(absp.relative_to(root).as_posix())
        except ValueError:
            continue  # outside the tree: not an input of the tree-scope rules
    return out
