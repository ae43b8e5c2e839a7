"""The knowledge of references (recipes, known differences, where the engine shows its codes), the seeded upstream
bugs (each applies exactly once to the release, a moved one fails loudly), and omnitts-capture's bad input: one
line, exit 2, nothing built."""

from __future__ import annotations

import subprocess
import sys

import pytest

from omnitts.knowledge import references, upstream
from omnitts.reference_models import upstream_mutants


def test_recipe_of_qwen_tts():
    recipe = references.reference("qwen-tts")
    assert recipe.model == "qwen3_tts" and references.reference_for_model("qwen3_tts") is recipe
    assert "transformers==4.57.3" in recipe.requirements and "gradio" in recipe.omitted
    assert recipe.torch == "torch==2.13.0" and recipe.hide_c_extensions == ("torchaudio",)
    assert references.reference_for_model("ming_tts") is None
    with pytest.raises(references.UnknownReference, match="no reference environment 'nope'"):
        references.reference("nope")


def test_release_facts():
    known = references.known_differences("0.30.0", "qwen3_tts")
    assert [k.id for k in known] == ["qwen3_tts.codebook0_code0", "qwen3_tts.encoder_bf16"]
    assert known[0].explains([[0, 5]], 0) and not known[0].explains([[7, 0]], 0) and not known[1].explains([[0]], 0)
    assert references.known_differences("0.22.0", "qwen3_tts") == ()
    seen = references.engine_observation("0.30.0", "qwen3_tts")
    assert seen.model_class == "Qwen3TTSCode2Wav" and seen.dtype_attributes == ("_embedding_dtype",)
    assert upstream.prompt_length("0.30.0", "qwen3_tts").endswith("estimate_prompt_len_from_additional_information")
    assert upstream.prompt_length("0.30.0", "ming_tts") is None


def test_seeded_bugs_apply_exactly_once_to_the_release(pristine):
    tree = pristine("0.30.0")
    assert len(upstream_mutants.BUGS) >= 6
    for bug in upstream_mutants.BUGS:
        text = (tree / bug.file).read_text()
        patched = upstream_mutants.patched_text(text, bug)
        assert patched != text and patched.count(bug.new) == text.count(bug.new) + 1, bug.name


def test_a_moved_patch_fails_loudly():
    bug = upstream_mutants.bug("rope-theta")
    with pytest.raises(upstream_mutants.PatchDoesNotApply, match="not found exactly once"):
        upstream_mutants.patched_text("nothing here", bug)
    twice = bug.old + "\n" + bug.old
    with pytest.raises(upstream_mutants.PatchDoesNotApply):
        upstream_mutants.patched_text(twice, bug)
    with pytest.raises(KeyError, match="no upstream bug"):
        upstream_mutants.bug("nope")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--reference", "nope"], "no reference environment 'nope'"),
        (["--model", "ming_tts"], "omnitts knows no reference for it"),
        (["--reference", "qwen-tts"], "no config.json"),
        ([], "name the reference"),
    ],
)
def test_capture_bad_input_is_one_line_and_exit_2(tmp_path, args, message):
    cmd = [sys.executable, "-m", "omnitts.validators.parity.cli", *args]
    cmd += ["--checkpoint", str(tmp_path / "none"), "--out", str(tmp_path / "cap")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not (tmp_path / "cap").exists()
