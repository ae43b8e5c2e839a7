"""Every bad argument of omnitts-scaffold is one line on stderr and exit 2, as docs/scaffold.md says: argparse's
own refusals (no usage block), empty values (never a default in disguise), a --work-dir that is a file,
files the merge driver cannot read, and a name no model has."""

from __future__ import annotations

import pytest

from omnitts.scaffold.cli import main


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse exits from inside main
        return exc.code


def _one_line_usage_error(capsys, argv, match):
    code = _run(argv)
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.err.count("\n") == 1 and captured.err.startswith("omnitts-scaffold: error: "), captured.err
    assert match in captured.err, captured.err
    assert captured.out == ""


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([], "the following arguments are required: command"),
        (["bogus"], "invalid choice: 'bogus'"),
        (["new"], "the following arguments are required: name"),
        (["new", "x_tts"], "one of the arguments --pattern --like is required"),
        (["new", "x_tts", "--pattern", "three-stage"], "argument --pattern: invalid choice: 'three-stage'"),
        (["new", "x_tts", "--pattern", "two-stage", "--detect-priority", "abc"], "invalid int value: 'abc'"),
        (["new", "x_tts", "--pattern", "two-stage", "--priority", "urgent"], "argument --priority: invalid choice"),
        (["new", "x_tts", "--pattern", "two-stage", "--like", "fish_speech"], "not allowed with argument"),
        (["new", "x_tts", "--pattern", "two-stage", "--target", ""], "argument --target: must not be empty"),
        (["new", "x_tts", "--like", ""], "argument --like: must not be empty"),
        (["new", "x_tts", "--pattern", "two-stage", "--model-type", ""], "argument --model-type: must not be empty"),
        (["new", "x_tts", "--pattern", "two-stage", "--stage-key", " "], "argument --stage-key: must not be empty"),
        (["new", "x_tts", "--pattern", "two-stage", "--arch", ""], "argument --arch: must not be empty"),
        (["check"], "the following arguments are required: name"),
        (["remove", "x_tts", "--target", ""], "argument --target: must not be empty"),
        (["remove", "x_tts", "--bogus"], "unrecognized arguments: --bogus"),
        (["clean", "--work-dir", ""], "argument --work-dir: must not be empty"),
    ],
)
def test_argument_errors_are_one_line(capsys, argv, match):
    _one_line_usage_error(capsys, argv, match)


def test_a_work_dir_that_is_a_file_is_refused(tmp_path, capsys):
    a_file = tmp_path / "file"
    a_file.write_text("x")
    _one_line_usage_error(capsys, ["clean", "--work-dir", str(a_file)], "is not a folder")
    argv = ["new", "x_tts", "--pattern", "two-stage", "--target", "pypi:vllm-omni==0.30.0", "--work-dir", str(a_file)]
    _one_line_usage_error(capsys, argv, "is not a folder")
    assert a_file.read_text() == "x"


def test_the_merge_driver_names_a_file_it_cannot_read(tmp_path, capsys):
    (tmp_path / "base").write_text("A = 1\n")
    paths = [str(tmp_path / "base"), str(tmp_path / "ours"), str(tmp_path / "theirs")]
    _one_line_usage_error(capsys, ["resolve", *paths, "--path", "registry.py"], f"cannot read {paths[1]}")


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["check", "no_such_tts"], "no model 'no_such_tts' in this tree"),
        (["remove", "no_such_tts"], "no model folder vllm_omni/model_executor/models/no_such_tts/"),
        (["new", "x_tts", "--like", "no_such_tts"], "no model 'no_such_tts' in this tree"),
    ],
)
def test_an_unknown_model_is_one_line(work_tree, capsys, argv, match):
    _one_line_usage_error(capsys, [*argv, "--target", str(work_tree("0.30.0"))], match)
