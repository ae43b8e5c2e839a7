"""The import graph between omnitts's layers, read from the source folders (no install needed).

setup.py maps each top-level folder to `omnitts.<folder>` (knowledge/ -> omnitts.knowledge), so tools that
infer packages from folders (grimp/import-linter, pydeps, an IDE without the editable install) see no
`omnitts` package in a checkout. This script applies the same mapping: it parses every module with `ast`
and prints, per layer, the layers it imports (`--modules` for module-level edges). `--check` fails when the
knowledge layer imports any other layer.

Usage: python scripts/import_graph.py [--modules] [--check]
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAYERS = ("knowledge", "scaffold", "validators", "reference_models")  # setup.py ROOTS
ALLOWED = {"knowledge": set()}  # the knowledge layer imports none of the others


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return "omnitts." + ".".join(parts)


def imports_of(path: Path) -> set[str]:
    found = set()
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return {m for m in found if m.startswith("omnitts.")}


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            if "/ref_" in path.as_posix():  # rendered reference models: standalone packages
                continue
            edges[module_name(path)] |= imports_of(path)
    return edges


def main(argv: list[str]) -> int:
    edges = graph()
    layer_of = lambda m: m.split(".")[1]  # noqa: E731
    by_layer: dict[str, set[str]] = defaultdict(set)
    for src, dsts in edges.items():
        by_layer[layer_of(src)] |= {layer_of(d) for d in dsts if layer_of(d) != layer_of(src)}
    for layer in LAYERS:
        print(f"{layer} -> {', '.join(sorted(by_layer[layer])) or '(nothing)'}")
    if "--modules" in argv:
        for src in sorted(edges):
            for dst in sorted(edges[src]):
                if layer_of(dst) != layer_of(src):
                    print(f"  {src} -> {dst}")
    bad = [
        f"{src} -> {dst}"
        for src, dsts in edges.items()
        for dst in dsts
        if layer_of(src) in ALLOWED and layer_of(dst) != layer_of(src) and layer_of(dst) not in ALLOWED[layer_of(src)]
    ]
    if "--check" in argv and bad:
        print("layering violated:\n  " + "\n  ".join(sorted(bad)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
