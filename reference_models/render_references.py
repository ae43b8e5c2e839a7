"""Render the reference models from the pattern templates: ``python -m omnitts.reference_models.render_references``.

Each reference model is the standalone render (``target=standalone``, ``module_prefix=omnitts.reference_models``,
``name=ref_<pattern>``) of ``templates/patterns/<pattern>/``, committed under ``reference_models/ref_<pattern>/``.
``tests/reference_models/test_drift.py`` re-renders into a temporary directory and requires byte equality, so the
model ``omnitts-scaffold new`` generates for a pattern and the reference model of that pattern cannot drift apart.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

PATTERNS: dict[str, str] = {
    "ref_two_stage": "two-stage",
    "ref_single_stage": "single-stage",
    "ref_native_ar": "native-ar",
}

REFERENCE_DIR = Path(__file__).resolve().parent


def reference_context(name: str, pattern: str, *, target: str = "standalone") -> dict[str, str]:
    """The template context of a reference model (the scaffold's own context builder, so both agree)."""
    from omnitts.scaffold.naming import make_names, template_context

    return template_context(make_names(name, pattern), target=target)


def render(pattern: str, ctx: dict[str, str], out_dir: Path) -> Path:
    """Render a reference model into ``out_dir``: the pattern template (``models/<name>/...``,
    ``stage_input_processors/``) plus the deploy config the scaffold's shared template writes for it
    (``deploy/<model_type>.yaml``, which the catalog reads for scheduling and the ``max_num_seqs`` mutant)."""
    from omnitts.scaffold.render import render_pattern, render_shared

    render_pattern(pattern, ctx, out_dir)
    deploy = f"vllm_omni/deploy/{ctx['model_type']}.yaml"
    path = out_dir / "deploy" / f"{ctx['model_type']}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_shared(ctx)[deploy], encoding="utf-8")
    return out_dir


def rendered_files(root: Path) -> dict[str, bytes]:
    """``{relative posix path: bytes}`` of a rendered tree (caches excluded)."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def render_reference(name: str, out_dir: Path) -> Path:
    return render(PATTERNS[name], reference_context(name, PATTERNS[name]), out_dir)


def regenerate(names: list[str] | None = None) -> list[Path]:
    """Rewrite the committed renders of ``names`` (all reference models by default)."""
    written = []
    for name in names or list(PATTERNS):
        with tempfile.TemporaryDirectory() as tmp:
            root = render_reference(name, Path(tmp) / name)
            target = REFERENCE_DIR / name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(root, target, ignore=shutil.ignore_patterns("__pycache__"))
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"reference models to render (default all: {', '.join(PATTERNS)})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(PATTERNS))
    if unknown:
        parser.error(f"unknown reference model(s) {', '.join(unknown)}; choose from {', '.join(PATTERNS)}")
    for path in regenerate(args.names or None):
        print(f"rendered {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
