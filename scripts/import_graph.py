"""The import graph between omnitts's top-level packages, read from the source folders (no install needed), and the
table of the edges allowed between them.

setup.py maps each top-level folder to `omnitts.<folder>` (knowledge/ -> omnitts.knowledge), so tools that infer
packages from folders (grimp/import-linter, pydeps, an IDE without the editable install) see no `omnitts` package in
a checkout. This script applies the same mapping and parses every module with `ast`. An edge is any import of an
omnitts module: at module level or inside a function, and by name (`importlib.import_module("omnitts.x")`,
`__import__`, `find_spec`, pytest's `import_plugin` and `pytest_plugins`, with the name written there or in a
module-level constant). Entry points of omnitts's own groups in pyproject.toml are plugin edges: the provider
registers itself with the consumer, which imports nothing of it (`--plugins` lists them).

Usage: python scripts/import_graph.py [--modules] [--plugins] [--check]
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The layers, bottom first, and what each may import. console and knowledge import nothing of omnitts; templates
# are data (Jinja/cookiecutter files) that only the scaffold's renderer and the tree-model loader read.
ALLOWED: dict[str, set[str]] = {
    "console": set(),
    "knowledge": set(),
    "templates": set(),
    "scaffold": {"console", "knowledge", "templates"},
    "validators": {"console", "knowledge", "scaffold", "templates"},
    "reference_models": {"console", "knowledge", "scaffold", "templates", "validators"},
}
# Entry-point groups omnitts reads itself: the package that registers in the group is above the one that reads it.
PLUGIN_GROUPS = {"omnitts.model_catalogs": "validators"}
_NAME = re.compile(r"^omnitts\.[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_IMPORTERS = ("import_module", "__import__", "find_spec", "import_plugin")  # calls that import by name


def roots() -> tuple[str, ...]:
    """setup.py's ROOTS (read, not imported: importing setup.py runs setup())."""
    for node in ast.parse((REPO / "setup.py").read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "ROOTS":
            return tuple(ast.literal_eval(node.value))
    raise SystemExit("setup.py has no ROOTS")


LAYERS = roots()


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return "omnitts." + ".".join(parts)


def _strings(node: ast.AST, constants: dict[str, str]) -> list[str]:
    """The strings an expression holds: a constant, a module-level constant's name, a tuple or list of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in constants:
        return [constants[node.id]]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [s for item in node.elts for s in _strings(item, constants)]
    return []


def _imported_by_name(tree: ast.Module) -> set[str]:
    """Modules imported by a dotted name in a string (import calls, ``pytest_plugins``)."""
    constants = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee in _IMPORTERS:
                names += [s for arg in node.args[:1] for s in _strings(arg, constants)]
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytest_plugins" for t in node.targets):
            names += _strings(node.value, constants)
    return {n for n in names if _NAME.match(n)}


def imports_of(path: Path) -> set[str]:
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = _imported_by_name(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
                found |= {f"{node.module}.{a.name}" for a in node.names}  # `from omnitts import templates`
    return {m for m in found if m.startswith("omnitts.")}


def _is_module(name: str) -> bool:
    """Whether ``omnitts.a.b`` is a module or package of the checkout (not a name imported from one)."""
    path = REPO.joinpath(*name.split(".")[1:])
    return path.with_suffix(".py").is_file() or path.is_dir()


def layer_of(module: str) -> str:
    return module.split(".")[1]


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for layer in LAYERS:
        for path in sorted((REPO / layer).rglob("*.py")):
            if "/ref_" in path.as_posix():  # rendered reference models: standalone packages
                continue
            edges[module_name(path)] |= imports_of(path)
    return edges


def layer_edges(edges: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Layer -> the other layers its modules import."""
    by_layer: dict[str, set[str]] = defaultdict(set)
    for src, dsts in (edges or graph()).items():
        by_layer[layer_of(src)] |= {layer_of(d) for d in dsts if layer_of(d) != layer_of(src)}
    return by_layer


def plugin_edges() -> list[tuple[str, str, str]]:
    """(group, provider layer, consumer layer) of each entry point of omnitts's own groups in pyproject.toml."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    found = []
    for group, consumer in PLUGIN_GROUPS.items():
        section = re.search(rf'^\[project\.entry-points\."{re.escape(group)}"\]\n((?:[^\[].*\n?)*)', text, re.M)
        for line in (section.group(1) if section else "").splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                target = line.split("=", 1)[1].strip().strip('"')
                found.append((group, layer_of(target), consumer))
    return found


def cycles(by_layer: dict[str, set[str]]) -> list[list[str]]:
    """The cycles among layers (each as the layers on it), found by depth-first search."""
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(by_layer.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(by_layer):
        if node not in state:
            visit(node)
    return found


def violations(edges: dict[str, set[str]] | None = None) -> list[str]:
    edges = edges or graph()
    return sorted(
        f"{src} -> {dst}"
        for src, dsts in edges.items()
        for dst in dsts
        if layer_of(dst) != layer_of(src) and layer_of(dst) not in ALLOWED.get(layer_of(src), set())
    )


def main(argv: list[str]) -> int:
    edges = graph()
    by_layer = layer_edges(edges)
    for layer in ALLOWED:
        print(f"{layer} -> {', '.join(sorted(by_layer[layer])) or '(nothing)'}")
    if "--modules" in argv:
        for src in sorted(edges):
            for dst in sorted(edges[src]):
                if layer_of(dst) != layer_of(src) and _is_module(dst):
                    print(f"  {src} -> {dst}")
    if "--plugins" in argv:
        for group, provider, consumer in plugin_edges():
            print(f"  {consumer} <- {provider} (entry points {group})")
    bad, loops = violations(edges), cycles(by_layer)
    if "--check" in argv and (bad or loops):
        print("layering violated:\n  " + "\n  ".join(bad + [" -> ".join(c) for c in loops]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
