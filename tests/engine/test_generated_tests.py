"""The tests `new` writes into the contributor's tree pass there, against the release's own vLLM-Omni and vLLM:
every pattern scaffolded into 0.30.0, its contract test run in the engine environment exactly as docs/tutorial.md
runs it (``omnitts-engine-env --omni-root . -- python -m pytest -q tests/model_executor/models/NAME``).

The two-stage contract test used to index the async-chunk processor's window as a dict (``window["codes"]["audio"]``);
from 0.22 the processor returns an ``OmniPayloadStruct``, so 3 of its 4 tests died with ``TypeError:
'OmniPayloadStruct' object is not subscriptable`` here. (0.20.0's generated tests run under the real vLLM in
tests/real_vllm.)
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .conftest import scaffold

pytestmark = pytest.mark.engine

PATTERNS = ("two-stage", "single-stage", "native-ar")


@pytest.mark.parametrize("pattern", PATTERNS)
def test_generated_contract_tests_pass_on_the_release(pattern, tmp_path, engine_python):
    name = f"gen_{pattern.replace('-', '_')}"
    tree = scaffold(tmp_path, pattern, name)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnitts.validators.engine.install",
            "--omni-root",
            ".",
            "--",
            "python",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"tests/model_executor/models/{name}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tree,
    )
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    assert proc.returncode == 0, f"{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    assert re.fullmatch(r"4 passed(, \d+ warnings?)? in .*", summary), summary
