"""`omnitts-scaffold resolve`: two models scaffolded on two branches of one tree merge cleanly.

Proof, per era: with the merge driver installed, `git merge` (and `git rebase`) of the two branches
succeeds; without it, the conflicts git reports are resolved by `resolve` from the index. Either way
both models are integrated (every file parses, the tree's ruff passes, detection resolves both,
`check` finds both complete), and removing both models restores the original tree byte for byte.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from omnitts.knowledge import layout
from omnitts.knowledge.eras import detect_profile
from omnitts.scaffold.check import check_model
from omnitts.scaffold.cli import main
from omnitts.scaffold.resolve import SHARED_FILES, merge_texts
from omnitts.scaffold.tree_ruff import run_tree_ruff

BIN = str(Path(sys.executable).parent)  # omnitts-scaffold, for git to run as the merge driver


def git(root, *args, check=True):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "GIT_EDITOR": "true"}
    proc = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, capture_output=True, text=True, env=env
    )
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)}: {proc.stdout}\n{proc.stderr}")
    return proc


def two_branches(root, first=("alpha_tts", "two-stage"), second=("beta_tts", "single-stage")):
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    for branch, (name, pattern) in (("a", first), ("b", second)):
        git(root, "checkout", "-q", "-b", branch, "main")
        assert main(["new", name, "--pattern", pattern, "--target", str(root)]) == 0
        git(root, "add", "-A")
        git(root, "commit", "-qm", f"add {name}")
    git(root, "checkout", "-q", "a")


def assert_both_integrated(root, hash_tree, before, ruff_config_root, names=("alpha_tts", "beta_tts")):
    profile = detect_profile(root)
    shared = [rel for rel in SHARED_FILES if (root / rel).is_file()]
    for rel in shared:
        text = (root / rel).read_text()
        assert "<<<<<<<" not in text and ">>>>>>>" not in text, rel
    code, output = run_tree_ruff(root, [rel for rel in shared if rel.endswith(".py")], config_root=ruff_config_root)
    assert code == 0, output
    for name in names:
        (report,) = check_model(profile, name)
        assert report.complete, (name, [(g.point, g.detail) for g in report.gaps])
    for name in names:
        assert main(["remove", name, "--target", str(root)]) == 0
    assert hash_tree(root) == before


@pytest.fixture(scope="module")
def ruff_config_root(pristine):
    return pristine("0.20.0")


@pytest.mark.parametrize("version", ["0.20.0", "0.24.0", "0.30.0"])
def test_merge_driver_merges_two_scaffolded_models(work_tree, hash_tree, ruff_config_root, version):
    root = work_tree(version)
    before = hash_tree(root)
    two_branches(root)
    assert main(["resolve", "--install", "--target", str(root)]) == 0
    attributes = (root / ".git/info/attributes").read_text()
    assert all(f"{rel} merge=omnitts" in attributes for rel in SHARED_FILES)
    proc = git(root, "merge", "--no-edit", "b", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert git(root, "status", "--porcelain").stdout == ""
    assert_both_integrated(root, hash_tree, before, ruff_config_root)


@pytest.mark.parametrize("version", ["0.20.0", "0.26.0"])
def test_resolve_after_a_conflicted_merge(work_tree, hash_tree, ruff_config_root, capsys, version):
    root = work_tree(version)
    before = hash_tree(root)
    two_branches(root)
    proc = git(root, "merge", "--no-edit", "b", check=False)
    assert proc.returncode != 0 and "CONFLICT" in proc.stdout
    conflicted = {line[3:] for line in git(root, "status", "--porcelain").stdout.splitlines() if line.startswith("UU")}
    assert conflicted and conflicted <= set(SHARED_FILES)
    capsys.readouterr()
    assert main(["resolve", "--target", str(root)]) == 0
    out = capsys.readouterr().out
    assert all(f"{rel}: resolved (both sides kept)" in out for rel in conflicted)
    git(root, "commit", "-qm", "merge b", "--no-edit")
    assert_both_integrated(root, hash_tree, before, ruff_config_root)


def test_rebase_with_the_driver(work_tree, hash_tree, ruff_config_root):
    root = work_tree("0.30.0")
    before = hash_tree(root)
    two_branches(root)
    main(["resolve", "--install", "--target", str(root)])
    proc = git(root, "rebase", "b", check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_both_integrated(root, hash_tree, before, ruff_config_root)


@pytest.mark.parametrize("order", ["a-into-b", "b-into-a"])
def test_sorted_blocks_stay_sorted_whichever_side_merges(work_tree, hash_tree, order):
    # Both names sort right after `moss_tts` in the adapter import tuple and the isort block: same anchor.
    root = work_tree("0.30.0")
    two_branches(root, first=("mu_b", "single-stage"), second=("mu_a", "single-stage"))
    main(["resolve", "--install", "--target", str(root)])
    if order == "a-into-b":
        git(root, "checkout", "-q", "b")
        git(root, "merge", "--no-edit", "a")
    else:
        git(root, "merge", "--no-edit", "b")
    init = (root / layout.ADAPTERS_INIT).read_text()
    assert init.index("    mu_a,\n") < init.index("    mu_b,\n") < init.index("    omnivoice,\n")
    registry = (root / layout.PIPELINE_REGISTRY).read_text()
    assert registry.index("models.mu_a.pipeline") < registry.index("models.mu_b.pipeline")


def test_driver_mode_and_real_conflicts(tmp_path, capsys):
    base = "A = {\n    'x': 1,\n}\nB = 1\n"
    ours = "A = {\n    'x': 1,\n    'o': 2,\n}\nB = 2\n"
    theirs = "A = {\n    'x': 1,\n    't': 3,\n}\nB = 3\n"
    merged, unresolved = merge_texts(base, ours, theirs, "x.py")
    assert unresolved == 1 and "<<<<<<<" in merged  # `B` changed on both sides: not an addition
    assert "    'o': 2,\n    't': 3,\n" in merged  # the additions-only conflict is still merged
    paths = []
    for label, text in (
        ("base", base),
        ("ours", ours.replace("B = 2", "B = 1")),
        ("theirs", theirs.replace("B = 3", "B = 1")),
    ):
        path = tmp_path / label
        path.write_text(text)
        paths.append(str(path))
    assert main(["resolve", *paths, "--path", "x.py"]) == 0
    assert (tmp_path / "ours").read_text() == "A = {\n    'x': 1,\n    'o': 2,\n    't': 3,\n}\nB = 1\n"
    assert main(["resolve", paths[0], paths[1], "--path", "x.py"]) == 2
    assert "resolve takes BASE OURS THEIRS" in capsys.readouterr().err
    shutil.rmtree(tmp_path)
