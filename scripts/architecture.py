"""The parts of docs/architecture.md that are read from the code: the commands (pyproject's console scripts), the
packages (every folder with an ``__init__.py``, described by its docstring), the layer table (scripts/import_graph.py)
and which backend runs which check (the verdicts and the backends' observers).

    python scripts/architecture.py           print the generated blocks
    python scripts/architecture.py --write   rewrite them in docs/architecture.md

Each block sits between ``<!-- generated: NAME -->`` and ``<!-- /generated -->``; tests/test_architecture_doc.py
fails when the doc's blocks differ from these.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
BLOCK = re.compile(r"(<!-- generated: (\w+) -->\n)(.*?)(<!-- /generated -->)", re.S)
# packages without a docstring of their own
NO_DOCSTRING = {
    "validators": "the validators; `pytest validators` is pointed at this folder (its conftest.py loads the plugin)",
    "templates": "cookiecutter templates (data): the pattern templates, the shared files, the Jinja blocks",
}


def _graph():
    spec = importlib.util.spec_from_file_location("import_graph", REPO / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def console_scripts() -> dict[str, str]:
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    section = re.search(r"^\[project\.scripts\]\n((?:[^\[\n].*\n)*)", text, re.M).group(1)
    return dict(re.findall(r'^([\w-]+) = "([\w.:]+)"', section, re.M))


def packages() -> list[Path]:
    """Every package folder of omnitts (the top-level folders and each subfolder with an ``__init__.py``)."""
    found = []
    for top in (*_graph().LAYERS, "templates"):
        found.append(REPO / top)
        for init in sorted((REPO / top).rglob("__init__.py")):
            folder = init.parent
            if folder != REPO / top and "{{" not in folder.as_posix() and "/ref_" not in folder.as_posix():
                found.append(folder)
    return sorted(set(found))


def summary(folder: Path) -> str:
    init = folder / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) if init.is_file() else None
    if not doc:
        return NO_DOCSTRING[folder.relative_to(REPO).as_posix()]
    first = " ".join(doc.split("\n\n")[0].split())
    return first.replace("|", "\\|")


def block_commands() -> str:
    rows = ["| command | entry point |", "|---|---|"]
    rows += [f"| `{name}` | `{target}` |" for name, target in console_scripts().items()]
    rows.append("| `pytest validators --model NAME` | `validators/conftest.py` loads `omnitts.validators.plugin` |")
    return "\n".join(rows)


def block_packages() -> str:
    rows = ["| folder | import name | holds |", "|---|---|---|"]
    for folder in packages():
        rel = folder.relative_to(REPO).as_posix()
        rows.append(f"| `{rel}/` | `omnitts.{rel.replace('/', '.')}` | {summary(folder)} |")
    return "\n".join(rows)


def block_layers() -> str:
    graph = _graph()
    rows = ["| package | may import |", "|---|---|"]
    rows += [
        f"| `{layer}` | {', '.join(f'`{d}`' for d in sorted(deps)) or '(nothing)'} |"
        for layer, deps in graph.ALLOWED.items()
    ]
    plugins = [
        f"`{provider}` registers in `{group}`, read by `{consumer}`"
        for group, provider, consumer in graph.plugin_edges()
    ]
    return "\n".join(rows) + "\n\nPlugin edges (entry points, no import): " + "; ".join(plugins) + "."


def block_checks() -> str:
    sys.path.insert(0, str(REPO))
    from omnitts.validators.backends.harness import HarnessBackend
    from omnitts.validators.backends.offline import OfflineBackend
    from omnitts.validators.backends.server import ServerBackend
    from omnitts.validators.backends.url import UrlBackend
    from omnitts.validators.verdicts import VERDICTS

    backends = {
        "harness": HarnessBackend,
        "offline": OfflineBackend,
        "server": ServerBackend,
        "URL (probe)": UrlBackend,
    }
    rows = [
        "| check id | verdict | observes | " + " | ".join(backends) + " |",
        "|---|---|---|" + "---|" * len(backends),
    ]
    for check, judge in VERDICTS.items():
        where = f"`{judge.fn.__module__.rpartition('.')[2]}.{judge.fn.__name__}`"
        needs = ", ".join(f"`{kind.__name__}`" for kind in judge.needs)
        ran = " | ".join("yes" if b.runs(check) else "" for b in backends.values())
        rows.append(f"| `{check}` | {where} | {needs} | {ran} |")
    return "\n".join(rows)


BLOCKS = {"commands": block_commands, "packages": block_packages, "layers": block_layers, "checks": block_checks}


def render(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + BLOCKS[m.group(2)]() + "\n" + m.group(4), text)


def main(argv: list[str]) -> int:
    if "--write" in argv:
        DOC.write_text(render(DOC.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    for name, make in BLOCKS.items():
        print(f"<!-- generated: {name} -->\n{make()}\n<!-- /generated -->\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
