"""What `new` and `remove` tell the contributor: each file marked created / patched / deleted, and after
`new`, the next steps (the files that hold the tiny model, the commands that prove the port)."""

from __future__ import annotations

import re

from omnitts.scaffold.cli import main

MARKED = re.compile(r"^(created|patched|deleted) +(\S+)$")


def _marked(out: str) -> dict[str, str]:
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines and all(MARKED.match(line) for line in lines), out
    return {MARKED.match(line).group(2): MARKED.match(line).group(1) for line in lines}


def test_new_and_remove_mark_each_file_and_new_says_what_next(work_tree, capsys):
    root = work_tree("0.30.0")
    assert main(["new", "my_tts", "--pattern", "two-stage", "--target", str(root)]) == 0
    cap = capsys.readouterr()
    marks = _marked(cap.out)
    assert marks["vllm_omni/model_executor/models/my_tts/my_tts_talker.py"] == "created"
    assert marks["vllm_omni/model_executor/models/registry.py"] == "patched"
    assert sum(m == "created" for m in marks.values()) == int(re.search(r"(\d+) file\(s\) created", cap.err)[1])
    assert all((root / rel).is_file() for rel in marks)
    steps = cap.err.split("next steps", 1)[1]
    # The files that hold the tiny model, the tests, validators and hooks to run.
    for needle in (
        "models/my_tts/my_tts_talker.py",
        "models/my_tts/my_tts_code2wav.py",
        "models/my_tts/configuration_my_tts.py",
        "load_weights()",
        "vllm_omni/deploy/my_tts.yaml",
        "python -m pytest -q tests/model_executor/models/my_tts",
        f"omnitts-validate --omni-root {root} --model my_tts",
        "omnitts-lint vllm_omni/model_executor/models/my_tts",
        "pre-commit run",
        "docs/tutorial.md",
    ):
        assert needle in steps, needle
    tiny_model = steps.split("  2.", 1)[0]
    assert "pipeline.py" not in tiny_model and "__init__.py" not in tiny_model

    assert main(["remove", "my_tts", "--target", str(root)]) == 0
    removed = _marked(capsys.readouterr().out)
    assert removed["vllm_omni/model_executor/models/my_tts/my_tts_talker.py"] == "deleted"
    assert removed["vllm_omni/model_executor/models/registry.py"] == "patched"
    assert set(removed) == set(marks)
