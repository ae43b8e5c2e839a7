"""Count era tests outside the knowledge layer's era objects: `era ==`/`!=`/`in (...)`, `profile.kind ==`,
release-version comparisons, and branches on era-derived flags (`has_adapters`, `adapter_detection`,
`pipeline_registry ==`). Issue 9's goal is zero outside `knowledge/eras/` and `knowledge/runner.py`.

Usage: python scripts/era_tests.py [--list]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCOPES = ("knowledge", "scaffold", "validators", "reference_models")
# The era objects and the per-release runner table are where such tests belong.
OWNERS = ("knowledge/eras/", "knowledge/runner.py")
ERA_TEST = re.compile(
    r"""\bera\s*(==|!=|\bin\b\s*[(\[{])"""  # era == X, era in (X, Y)
    r"""|\.era\s*(==|!=|\bin\b|\bnot\s+in\b)"""
    r"""|\bprofile\.kind\s*(==|!=)"""
    r"""|\bpipeline_registry\s*(==|!=)"""
    r"""|\bminor\s*[<>]=?|\bmajor\s*[<>!=]=?"""  # version comparisons on parsed release numbers
    r"""|_key\(\w*version\w*\)\s*[<>]"""
    r"""|\b(if|elif|and|or|not)\b[^#]*\bprofile\.(has_adapters|adapter_detection)\b"""
    r"""|\bif\b[^#]*\bprofile\.(has_adapters|adapter_detection)\s+else\b"""
    r"""|\bprofile\.(has_adapters|adapter_detection)\s+(if|else)\b"""
)


def era_tests() -> list[str]:
    found = []
    for scope in SCOPES:
        for path in sorted((REPO / scope).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel.startswith(OWNERS) or "/ref_" in rel:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if ERA_TEST.search(line.split("#", 1)[0]):
                    found.append(f"{rel}:{number}: {line.strip()}")
    return found


if __name__ == "__main__":
    tests = era_tests()
    if "--list" in sys.argv:
        print("\n".join(tests))
    print(f"{len(tests)} era tests outside {', '.join(OWNERS)}")
