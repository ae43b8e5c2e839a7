"""Bad input: one-line error, non-zero exit, and the tree byte-for-byte unchanged."""

from __future__ import annotations

import stat

import pytest

from omnitts.knowledge.eras import detect_profile
from omnitts.scaffold.cli import main
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.naming import MAX_NAME_LENGTH, make_names
from omnitts.scaffold.new import plan_new

SERVING = "vllm_omni/entrypoints/openai/serving_speech.py"


def _refused(capsys, root, hash_tree, *argv, match):
    before = hash_tree(root)
    code = main(["new", *argv, "--target", str(root)])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and err.startswith("omnitts-scaffold: error: "), err
    assert match in err, err
    assert hash_tree(root) == before


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["My-TTS", "--pattern", "two-stage"], "not a valid lower_snake_case Python identifier"),
        (["class", "--pattern", "two-stage"], "is a Python keyword"),
        (["moss_tts_nano", "--pattern", "single-stage"], "already exists"),
        (
            ["new_tts", "--pattern", "single-stage", "--stage-key", "qwen3_tts"],
            "stage key 'qwen3_tts' is already served",
        ),
        (
            ["new_tts", "--pattern", "single-stage", "--arch", "MossTTSNanoForCausalLM"],
            "architecture 'MossTTSNanoForCausalLM' already exists",
        ),
        (["new_tts", "--pattern", "single-stage", "--model-type", "qwen3_tts"], "qwen3_tts"),
    ],
)
def test_refusals_leave_tree_unchanged(work_tree, hash_tree, capsys, argv, match):
    _refused(capsys, work_tree("0.20.0"), hash_tree, *argv, match=match)


def test_unknown_pattern(capsys, work_tree, hash_tree):
    root = work_tree("0.20.0")
    before = hash_tree(root)
    with pytest.raises(SystemExit) as info:
        main(["new", "x_tts", "--pattern", "three-stage", "--target", str(root)])
    assert info.value.code == 2
    assert "invalid choice: 'three-stage'" in capsys.readouterr().err
    assert hash_tree(root) == before


def test_not_a_tree(tmp_path, capsys, hash_tree):
    (tmp_path / "README.md").write_text("hello\n")
    _refused(capsys, tmp_path, hash_tree, "x_tts", "--pattern", "two-stage", match="is not a vLLM-Omni tree")


def test_unsupported_era(work_tree, capsys, hash_tree):
    _refused(
        capsys,
        work_tree("0.16.0"),  # 0.18 is written since the legacy stage_configs era exists
        hash_tree,
        "x_tts",
        "--pattern",
        "two-stage",
        match="single-model serving (0.14-0.16) era",
    )


def test_read_only_shared_file(work_tree, capsys, hash_tree):
    root = work_tree("0.20.0")
    path = root / SERVING
    path.chmod(stat.S_IRUSR | stat.S_IRGRP)  # refused by mode bits, so this holds when tests run as root too
    _refused(capsys, root, hash_tree, "x_tts", "--pattern", "two-stage", match="is read-only")


def test_merge_conflict_markers(work_tree, capsys, hash_tree):
    root = work_tree("0.20.0")
    path = root / "vllm_omni/model_executor/models/registry.py"
    text = path.read_text()
    path.write_text(text.replace("_OMNI_MODELS = {", "<<<<<<< HEAD\n=======\n>>>>>>> other\n_OMNI_MODELS = {", 1))
    _refused(capsys, root, hash_tree, "x_tts", "--pattern", "two-stage", match="registry.py:")


def test_failure_during_apply_restores_every_byte(work_tree, hash_tree):
    root = work_tree("0.20.0")
    before = hash_tree(root)
    plan = plan_new(detect_profile(root), make_names("roll_tts", "two-stage"), parallel=False)
    assert len(plan.changes) > 10
    for fail_after in (1, len(plan.changes) // 2, len(plan.changes) - 1):
        with pytest.raises(ScaffoldError, match="tree restored"):
            plan.apply(fail_after=fail_after)
        assert hash_tree(root) == before
    assert not (root / "vllm_omni/model_executor/models/roll_tts").exists()


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["registry", "--pattern", "two-stage"], "vllm_omni/model_executor/models/registry.py already exists"),
        (["utils", "--pattern", "single-stage"], "vllm_omni/model_executor/models/utils.py already exists"),
        (["common", "--pattern", "native-ar"], "vllm_omni/model_executor/models/common already exists"),
        (["registry", "--like", "qwen3_tts"], "models/registry.py already exists: the model name 'registry' would"),
        (["base", "--pattern", "two-stage"], "tts_adapters/base.py already exists"),
        (["my_tts\n", "--pattern", "two-stage"], "not a valid lower_snake_case Python identifier"),
        (["my_tts\t", "--pattern", "two-stage"], "not a valid lower_snake_case Python identifier"),
        (["a" * 300, "--pattern", "two-stage"], "model name of 300 characters is too long: at most 64"),
        (["my_tts", "--pattern", "two-stage", "--model-type", "t" * 65], "model type of 65 characters is too long"),
    ],
)
def test_names_are_checked_against_the_tree(work_tree, hash_tree, capsys, argv, match):
    _refused(capsys, work_tree("0.30.0"), hash_tree, *argv, match=match)


def test_the_longest_name_fits_every_derived_file_name(work_tree, hash_tree, capsys):
    """64 characters, in the sdist tree (examples, tests): written, then removed byte for byte."""
    root = work_tree("0.20.0")
    before = hash_tree(root)
    name = "n" * MAX_NAME_LENGTH
    assert main(["new", name, "--pattern", "two-stage", "--target", str(root)]) == 0
    assert (root / f"tests/model_executor/models/{name}/test_{name}_streaming_contract.py").is_file()
    assert main(["remove", name, "--target", str(root)]) == 0
    assert hash_tree(root) == before
