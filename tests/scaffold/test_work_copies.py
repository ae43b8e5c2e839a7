"""Issue 12.6: `--target pypi:` reuses an unchanged working copy, `--work-dir` chooses the folder, `clean`
removes copies, and a refused or failing run leaves no copy behind."""

from __future__ import annotations

from omnitts.knowledge import releases
from omnitts.scaffold.cli import main

VERSION = "0.22.0"  # the smallest supported tree (a wheel, 15 MB)
SPEC = f"pypi:vllm-omni=={VERSION}"


def test_unchanged_copy_is_reused_and_a_modified_one_is_not(tmp_path, pristine):
    pristine(VERSION)
    first, created = releases.copy_for_run(VERSION, tmp_path)
    assert created and first == tmp_path / f"vllm-omni-{VERSION}" and releases.is_unchanged_copy(first)
    again, created = releases.copy_for_run(VERSION, tmp_path)
    assert (again, created) == (first, False)

    (first / "vllm_omni" / "new_file.py").write_text("x = 1\n")
    assert not releases.is_unchanged_copy(first)
    second, created = releases.copy_for_run(VERSION, tmp_path)
    assert created and second == tmp_path / f"vllm-omni-{VERSION}-2"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"vllm-omni-{VERSION}", f"vllm-omni-{VERSION}-2"]


def test_cli_runs_share_one_copy_in_the_work_dir(tmp_path, capsys):
    assert main(["check", "qwen3_tts", "--target", SPEC, "--work-dir", str(tmp_path)]) == 0
    assert "working copy" in capsys.readouterr().err
    assert main(["check", "qwen3_tts", "--target", SPEC, "--work-dir", str(tmp_path)]) == 0
    assert "reusing unchanged copy" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == [f"vllm-omni-{VERSION}"]


def test_refused_release_leaves_nothing_behind(tmp_path, capsys):
    assert main(["new", "my_tts", "--pattern", "single-stage", "--target", "pypi:vllm-omni==0.16.0", "--work-dir",
                 str(tmp_path)]) == 2  # fmt: skip
    assert "unsupported vLLM-Omni layout" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_failing_run_removes_the_copy_it_made(tmp_path, capsys):
    # the model name is taken: refused after the copy was made
    assert main(["new", "qwen3_tts", "--pattern", "single-stage", "--target", SPEC, "--work-dir", str(tmp_path)]) == 2
    assert "error" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_clean_removes_unchanged_copies_and_keeps_modified_ones_unless_all(tmp_path, capsys):
    unchanged, _ = releases.copy_for_run(VERSION, tmp_path)
    modified = tmp_path / f"vllm-omni-{VERSION}-2"
    releases.working_copy(VERSION, modified)
    (modified / "vllm_omni" / "model.py").write_text("x = 1\n")
    other = tmp_path / "not-a-copy"
    other.mkdir()

    assert main(["clean", "--work-dir", str(tmp_path), "--dry-run"]) == 0
    assert unchanged.is_dir()
    assert main(["clean", "--work-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == str(unchanged) and f"kept {modified}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-a-copy", modified.name]

    assert main(["clean", "--work-dir", str(tmp_path), "--all"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["not-a-copy"]
