"""What the generated tests import from vLLM-Omni exists in every release the scaffold writes into.

The generated tests run against a release's own engine only where one installs here (0.30.0 in the engine
environment, tests/engine/test_generated_tests.py; 0.20.0 under the real vLLM, tests/real_vllm). For the other
releases this is what can be checked without vLLM: every ``from vllm_omni.X import NAME`` of every generated test
file names a module of the release (or of the scaffolded model) that defines NAME (read with ``ast``, nothing
imported). Checked by hand against a template that imports a name ``data_entry_keys`` does not define: it fails on
the releases whose test imports it (0.22+), names the module and the name.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from omnitts.knowledge.eras import detect_profile
from omnitts.knowledge.releases import pristine_tree
from omnitts.scaffold.naming import make_names
from omnitts.scaffold.new import plan_new

RELEASES = ("0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0")
PATTERNS = ("two-stage", "single-stage", "native-ar")


def _defined(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":  # lazy exports: `if name == "Omni":`
            names |= {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _module_source(root: Path, files: dict[str, str], module: str) -> str | None:
    rel = module.replace(".", "/")
    for candidate in (f"{rel}.py", f"{rel}/__init__.py"):
        if candidate in files:
            return files[candidate]
        if (root / candidate).is_file():
            return (root / candidate).read_text(encoding="utf-8")
    return None


@pytest.mark.parametrize("release", RELEASES)
def test_generated_tests_import_what_the_release_has(release):
    root = pristine_tree(release)
    profile = detect_profile(root)
    missing = []
    for pattern in PATTERNS:
        plan = plan_new(profile, make_names("my_tts", pattern), parallel=False)
        files = {op.rel: op.new for op in plan.ops if op.new is not None}
        tests = {rel: text for rel, text in files.items() if rel.startswith("tests/") and rel.endswith(".py")}
        assert tests, f"{pattern}: no generated test"
        for rel, text in tests.items():
            for node in ast.walk(ast.parse(text)):
                if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vllm_omni")):
                    continue
                source = _module_source(root, files, node.module)
                if source is None:
                    missing.append(f"{pattern} {rel}: no module {node.module}")
                    continue
                defined = _defined(source)
                for alias in node.names:
                    submodule = _module_source(root, files, f"{node.module}.{alias.name}")
                    if alias.name not in defined and submodule is None:
                        missing.append(f"{pattern} {rel}: {node.module} has no {alias.name}")
    assert not missing, "\n".join(missing)
