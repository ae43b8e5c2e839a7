"""`omnitts-scaffold remove NAME`: the exact inverse of `new`, byte for byte, on every supported release."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from omnitts.knowledge.eras import detect_profile
from omnitts.scaffold.cli import main
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.naming import PATTERNS, make_names
from omnitts.scaffold.new import plan_new
from omnitts.scaffold.remove import plan_remove

SUPPORTED = ["0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0"]


@pytest.mark.parametrize("version", SUPPORTED)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_new_then_remove_is_byte_identical(work_tree, hash_tree, capsys, version, pattern):
    root = work_tree(version)
    before = hash_tree(root)
    name = f"gone_{pattern.replace('-', '_')}"
    assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
    assert hash_tree(root) != before
    capsys.readouterr()
    assert main(["remove", name, "--target", str(root)]) == 0
    assert "file(s) deleted" in capsys.readouterr().err
    assert hash_tree(root) == before
    assert not (root / "vllm_omni/model_executor/models" / name).exists()
    assert main(["remove", *name.split(), "--target", str(root)]) == 2  # nothing left: the folder is gone


@pytest.mark.parametrize("version", ["0.18.0", "0.20.0", "0.26.0", "0.30.0"])
def test_removing_the_first_of_two_models_leaves_the_second_as_if_alone(
    work_tree, pristine, tmp_path, hash_tree, version
):
    first, alone = work_tree(version), tmp_path / "alone"
    shutil.copytree(pristine(version), alone)
    profile, profile_alone = detect_profile(first), detect_profile(alone)
    plan_new(profile, make_names("first_tts", "two-stage")).apply()
    plan_new(profile, make_names("second_tts", "single-stage")).apply()
    plan_remove(profile, "first_tts").apply()
    plan_new(profile_alone, make_names("second_tts", "single-stage")).apply()
    assert hash_tree(first) == hash_tree(alone)


def test_voice_cloning_and_shared_key_variants_are_removed_too(work_tree, hash_tree):
    root = work_tree("0.30.0")
    before = hash_tree(root)
    profile = detect_profile(root)
    names = make_names("shared_key", "native-ar", stage_key="latent_generator")
    plan_new(profile, names, voice_cloning=True, detect_priority=5).apply()
    plan_remove(profile, "shared_key").apply()
    assert hash_tree(root) == before


def test_dry_run_diff_applies_and_equals_the_removal(work_tree, hash_tree, capsys):
    root = work_tree("0.20.0")
    before = hash_tree(root)
    assert main(["new", "dry_gone", "--pattern", "two-stage", "--target", str(root)]) == 0
    for args in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "with model"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)
    with_model = hash_tree(root)
    capsys.readouterr()
    assert main(["remove", "dry_gone", "--target", str(root), "--dry-run"]) == 0
    diff = capsys.readouterr().out
    assert hash_tree(root) == with_model
    assert "+++ /dev/null" in diff
    subprocess.run(["git", "apply", "-"], cwd=root, input=diff, text=True, check=True)
    assert hash_tree(root) == before


def test_failure_during_remove_restores_every_byte(work_tree, hash_tree):
    root = work_tree("0.24.0")
    profile = detect_profile(root)
    plan_new(profile, make_names("roll_back", "two-stage")).apply()
    with_model = hash_tree(root)
    plan = plan_remove(profile, "roll_back")
    for fail_after in (1, len(plan.changes) // 2, len(plan.changes) - 1):
        with pytest.raises(ScaffoldError, match="tree restored"):
            plan.apply(fail_after=fail_after)
        assert hash_tree(root) == with_model


@pytest.mark.parametrize(
    ("version", "name", "match"),
    [
        ("0.30.0", "qwen3_tts", "does not have the files of a scaffolded model"),
        ("0.30.0", "qwen3_tts --force", "still refers to qwen3_tts"),
        ("0.20.0", "fish_speech --force", "still refers to fish_speech"),
        ("0.24.0", "voxcpm2 --force", "still refers to voxcpm2"),
        ("0.30.0", "no_such_model", "no model folder"),
        ("0.30.0", "Bad-Name", "not a valid lower_snake_case"),
    ],
)
def test_hand_wired_or_unknown_models_are_refused_with_the_tree_unchanged(
    work_tree, hash_tree, capsys, version, name, match
):
    root = work_tree(version)
    before = hash_tree(root)
    assert main(["remove", *name.split(), "--target", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err, err
    assert hash_tree(root) == before
