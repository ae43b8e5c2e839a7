"""The tutorial's Phase 1 (docs/tutorial.md step 6) on a scaffolded model, as written: ``omnitts-scaffold new NAME
--pattern two-stage`` into vLLM-Omni 0.30.0, the generated reference-adapter skeleton filled with the tutorial's
adapter, the model's checkpoint (``omnitts.validators.engine.modeldir``), ``omnitts-capture --adapter
tests/.../reference_adapter.py:<Camel>Reference``, then ``pytest validators --engine offline --checkpoint DIR
--reference CAPTURE -k parity`` through the real engine on CPU: every parity check passes."""

from __future__ import annotations

import re
import sys
import uuid
from pathlib import Path

import pytest

from omnitts.scaffold.naming import camel_case
from omnitts.validators import checkids

from .conftest import RELEASE, scaffold
from .test_parity_qwen3_tts import validators

pytestmark = [pytest.mark.engine, pytest.mark.slow]
TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"


def tutorial_adapter(name: str) -> str:
    """The adapter the tutorial fills the skeleton with, for the model ``name``."""
    blocks = re.findall(r"```python\n(.*?)```", TUTORIAL.read_text(encoding="utf-8"), flags=re.S)
    (block,) = [b for b in blocks if b.startswith("# tests/model_executor/models/my_tts/reference_adapter.py")]
    return block.replace("MyTts", camel_case(name)).replace("my_tts", name)


def test_scaffolded_two_stage_model_matches_its_reference(tmp_path, engine_python):
    from omnitts.validators.engine.runtime import EngineEnv
    from omnitts.validators.parity import cli

    name = f"tiny_par_{uuid.uuid4().hex[:6]}"
    tree = scaffold(tmp_path, "two-stage", name)
    adapter = tree / "tests" / "model_executor" / "models" / name / "reference_adapter.py"
    assert "NotImplementedError" in adapter.read_text(), "the scaffold wrote no adapter skeleton"
    adapter.write_text(tutorial_adapter(name))
    ckpt = EngineEnv.prepare(tree, RELEASE, tmp_path / "work").model_dir(name, tmp_path / "ckpt")
    spec = f"{adapter}:{camel_case(name)}Reference"
    args = ["--adapter", spec, "--python", sys.executable, "--checkpoint", str(ckpt), "--out", str(tmp_path / "cap")]
    cli.capture(cli._parser().parse_args(args))
    proc, outcome, _ = validators(tmp_path / "session", tree, ckpt, tmp_path / "cap", model=name)
    assert outcome == dict.fromkeys(checkids.PARITY, "passed"), proc.stdout[-6000:]
