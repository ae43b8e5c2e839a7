"""`remove` only removes what `new` can have created: shared packages, upstream models and model folders
grown by hand are refused with one line and the tree unchanged; `--force` lifts the shape checks only."""

from __future__ import annotations

import pytest

from omnitts.scaffold.cli import main

MODELS = "vllm_omni/model_executor/models"


def _refused(capsys, root, hash_tree, *argv, match):
    before = hash_tree(root)
    assert main(["remove", *argv, "--target", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("omnitts-scaffold: error: "), err
    assert match in err, err
    assert hash_tree(root) == before
    return err


@pytest.mark.parametrize(
    ("version", "name", "match"),
    [
        ("0.30.0", "common", f"{MODELS}/common/ has no pipeline.py: it is a shared package"),
        ("0.20.0", "qwen3_omni", f"{MODELS}/qwen3_omni/ does not have the files of a scaffolded model"),
        ("0.30.0", "fish_speech", f"{MODELS}/fish_speech/ does not have the files of a scaffolded model"),
        ("0.20.0", "fish_speech", f"{MODELS}/fish_speech/ does not have the files of a scaffolded model"),
    ],
)
def test_shared_packages_and_upstream_models_are_refused(work_tree, hash_tree, capsys, version, name, match):
    _refused(capsys, work_tree(version), hash_tree, name, match=match)


@pytest.mark.parametrize(
    ("version", "name", "match"),
    [
        ("0.30.0", "common", "still refers to common (models.common) after removal: the tree uses it"),
        ("0.20.0", "qwen3_omni", "still refers to qwen3_omni"),
        ("0.30.0", "fish_speech", "still refers to fish_speech"),
    ],
)
def test_force_still_needs_a_clean_leftovers_check(work_tree, hash_tree, capsys, version, name, match):
    _refused(capsys, work_tree(version), hash_tree, name, "--force", match=match)


def test_a_scaffolded_model_grown_by_hand_is_refused_then_forced(work_tree, hash_tree, capsys):
    root = work_tree("0.30.0")
    before = hash_tree(root)
    assert main(["new", "grown_tts", "--pattern", "single-stage", "--target", str(root)]) == 0
    extra = root / MODELS / "grown_tts" / "tokenizer_grown_tts.py"
    extra.write_text("# the contributor's own work\n")
    capsys.readouterr()
    _refused(capsys, root, hash_tree, "grown_tts", match="files new does not write: tokenizer_grown_tts.py")
    assert main(["remove", "grown_tts", "--force", "--target", str(root)]) == 0
    assert hash_tree(root) == before


def test_a_model_imported_by_another_module_is_refused_even_with_force(work_tree, hash_tree, capsys):
    root = work_tree("0.20.0")
    assert main(["new", "used_tts", "--pattern", "two-stage", "--target", str(root)]) == 0
    user = root / MODELS / "qwen3_tts" / "uses_it.py"
    user.write_text("from vllm_omni.model_executor.models.used_tts.configuration_used_tts import UsedTtsConfig\n")
    capsys.readouterr()
    for flags in ((), ("--force",)):
        _refused(capsys, root, hash_tree, "used_tts", *flags, match=f"{MODELS}/qwen3_tts/uses_it.py:1 still refers")
