"""Two writers on one tree: the interleaving that lost an update, forced at the tree lock.

The lost update: `new b` read the tree and checked it was unchanged, then, while it waited for the tree
lock, `new a` wrote its model; `b` then wrote files built from the tree without `a`, and both exited 0
with `a`'s registry, pipeline-registry and adapter entries gone. Here `a` runs (a real process) at the
moment `b` reaches for its lock (`journal.tree_lock` is wrapped), which is that interleaving exactly,
every time. Whatever a command saw must still be there when it writes: it plans after the lock, or it
refuses in one line; it never overwrites.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from omnitts.knowledge import layout
from omnitts.knowledge.eras import detect_profile
from omnitts.scaffold import journal
from omnitts.scaffold.cli import main
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.naming import make_names
from omnitts.scaffold.new import plan_new

RELEASE = "0.30.0"


def _scaffold(root: Path, *argv: str) -> subprocess.CompletedProcess:
    """Another omnitts-scaffold process on the same tree."""
    return subprocess.run(
        [sys.executable, "-m", "omnitts.scaffold.cli", *argv, "--target", str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMNITTS_FAULT": ""},
    )


def _entries(root: Path, name: str) -> dict[str, bool]:
    """Where `new` registers a model on a 0.30.0 tree: registry, pipeline registry, adapter import tuple."""
    registry = (root / layout.REGISTRY).read_text()
    pipelines = (root / layout.PIPELINE_REGISTRY).read_text()
    adapters = (root / layout.ADAPTERS_INIT).read_text()
    return {
        "registry": f'"{name}",' in registry,
        "pipeline registry": f"models.{name}.pipeline" in pipelines,
        "adapter": f"    {name},\n" in adapters,
        "package": (root / layout.MODELS / name / "pipeline.py").is_file(),
    }


@pytest.fixture
def other_writer_at_lock(monkeypatch):
    """Run `action()` once, when this process first reaches for a tree lock (before taking it)."""

    def install(action):
        real, fired = journal.tree_lock, []

        @contextlib.contextmanager
        def delayed(root):
            if not fired:
                fired.append(action())
            with real(root):
                yield

        monkeypatch.setattr(journal, "tree_lock", delayed)
        return fired

    return install


def test_a_write_while_new_waits_for_its_lock_is_kept(work_tree, hash_tree, capsys, other_writer_at_lock):
    root = work_tree(RELEASE)
    before = hash_tree(root)
    fired = other_writer_at_lock(lambda: _scaffold(root, "new", "first_tts", "--pattern", "two-stage"))
    code = main(["new", "second_tts", "--pattern", "single-stage", "--target", str(root)])
    capsys.readouterr()
    first = fired[0]
    assert first.returncode == 0, first.stderr
    # Both said they wrote their model: both models must be there, whole (or `second` must have refused).
    assert code == 0
    assert all(_entries(root, "first_tts").values()), _entries(root, "first_tts")
    assert all(_entries(root, "second_tts").values()), _entries(root, "second_tts")
    for name in ("first_tts", "second_tts"):
        assert main(["check", name, "--target", str(root)]) == 0, capsys.readouterr()
    assert main(["remove", "second_tts", "--target", str(root)]) == 0
    assert main(["remove", "first_tts", "--target", str(root)]) == 0
    assert hash_tree(root) == before


def test_a_plan_made_before_another_write_refuses_instead_of_overwriting(work_tree, other_writer_at_lock):
    root = work_tree(RELEASE)
    plan = plan_new(detect_profile(root), make_names("second_tts", "single-stage"), parallel=False)
    other_writer_at_lock(lambda: _scaffold(root, "new", "first_tts", "--pattern", "two-stage"))
    with pytest.raises(ScaffoldError) as info:
        plan.apply()
    message = str(info.value)
    assert "changed since the plan was made; nothing written" in message and "\n" not in message
    assert all(_entries(root, "first_tts").values()), _entries(root, "first_tts")
    assert not any(_entries(root, "second_tts").values())


def test_a_second_command_while_the_first_plans_is_refused_in_one_line(work_tree, hash_tree, capsys, monkeypatch):
    """The lock is held from the plan's first read: a writer that comes while `new` plans is refused."""
    from omnitts.scaffold import new

    root = work_tree(RELEASE)
    real, seen = new.plan_new, []

    def plan_then_other_writer(*args, **kwargs):
        plan = real(*args, **kwargs)
        seen.append(_scaffold(root, "new", "first_tts", "--pattern", "two-stage"))
        return plan

    monkeypatch.setattr(new, "plan_new", plan_then_other_writer)
    assert main(["new", "second_tts", "--pattern", "single-stage", "--target", str(root)]) == 0
    capsys.readouterr()
    other = seen[0]
    assert other.returncode == 2, other.stderr
    assert other.stderr.count("\n") == 1 and "another omnitts-scaffold command is writing" in other.stderr
    assert not any(_entries(root, "first_tts").values())
    assert all(_entries(root, "second_tts").values())
