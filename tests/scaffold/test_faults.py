"""Fault injection: a kill, a read-only folder or a full disk at EVERY file operation of `new` (and of
`remove`), for each pattern on a 0.30.0 and a 0.20.0 tree. After the fault and one re-run of a command,
the tree is byte for byte the original or the completed scaffold, with no temp file or journal left.

`OMNITTS_FAULT=KIND:N` (scaffold/faults.py) stops the Nth file operation. Kills run in a forked child
(a real SIGKILL: no cleanup code runs), EROFS / ENOSPC in this process. The plan is made once per
pattern and release and the tree restored between positions from the plan itself, so one position
costs one apply, one re-run and one stat walk of the tree (contents are read only where a file's
inode, size or times moved; the unchanged original is the PyPI tree in the cache).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from omnitts.knowledge.eras import detect_profile
from omnitts.scaffold import faults, journal
from omnitts.scaffold.cli import main
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.naming import PATTERNS, make_names
from omnitts.scaffold.new import plan_new
from omnitts.scaffold.remove import plan_remove

RELEASES = ("0.30.0", "0.20.0")
KINDS = ("kill", "erofs", "enospc")
NAME = "fault_tts"


def _walk(root: Path, skip: str) -> dict[str, tuple]:
    """rel -> ('d',) or ('f', mode, ino, size, mtime_ns, ctime_ns) for everything below root (not `skip`)."""
    out, stack = {}, [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.name == skip and d == root:
                    continue
                rel = os.path.relpath(e.path, root)
                st = e.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    out[rel] = ("d",)
                    stack.append(Path(e.path))
                else:
                    out[rel] = ("f", st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return out


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Tree:
    """A work copy and the two states a fault may leave it in: as before the plan (A) or with it applied (B).

    Files outside the plan must keep their inode, size and times; the plan's files must hold A's or B's
    bytes and mode; the set of paths (files and folders) must be A's or B's exactly, so a stray temp file,
    journal or empty folder is a failure."""

    def __init__(self, root: Path, plan) -> None:
        self.root, self.plan = root, plan
        self.base = _walk(root, ".git")
        self.ops = {op.rel: op for op in plan.changes}
        self.a_bytes = {rel: (root / rel).read_bytes() for rel, op in self.ops.items() if op.old is not None}
        created = {rel for rel, op in self.ops.items() if op.old is None}
        deleted = {rel for rel, op in self.ops.items() if op.new is None}
        self.created_dirs = {str(p) for rel in created for p in Path(rel).parents if str(p) not in self.base} - {"."}
        b_files = {k for k, e in self.base.items() if e[0] == "f"} - deleted | created
        self.pruned_dirs = {
            str(p)
            for rel in deleted
            for p in Path(rel).parents
            if str(p) != "." and not any(f.startswith(f"{p}/") for f in b_files)
        }
        self.keys = {
            "A": set(self.base),
            "B": (set(self.base) | created | self.created_dirs) - deleted - self.pruned_dirs,
        }

    def state(self) -> str:
        """'A', 'B', or what differs from both."""
        git = self.root / ".git"
        stray = [p.name for p in git.iterdir() if p.name.startswith("omnitts-journal")] if git.is_dir() else []
        if stray:
            return f"journal left in .git: {stray}"
        now = _walk(self.root, ".git")
        problems = []
        for want in ("A", "B"):
            if set(now) != self.keys[want]:
                extra, missing = sorted(set(now) - self.keys[want]), sorted(self.keys[want] - set(now))
                problems.append(f"{want}: extra {extra[:4]} missing {missing[:4]}")
                continue
            problem = self._contents(now, want)
            if problem is None:
                return want
            problems.append(problem)
        return "; ".join(problems)

    def _contents(self, now: dict, want: str) -> str | None:
        for rel, entry in now.items():
            if entry[0] == "d":
                continue
            op = self.ops.get(rel)
            if op is None:
                if entry != self.base[rel]:
                    return f"{want}: {rel} (outside the plan) was written"
                continue
            if want == "A":
                expected, mode = self.a_bytes[rel], self.base[rel][1]
            else:
                expected = op.new.encode()
                mode = self.base[rel][1] if rel in self.base else (0o100755 if rel.endswith(".sh") else 0o100644)
            if entry[1] != mode or _sha((self.root / rel).read_bytes()) != _sha(expected):
                return f"{want}: {rel} has other bytes or mode"
        return None

    def reset(self) -> None:
        """From B back to A (bytes and modes), without a full copy."""
        for rel in sorted(self.pruned_dirs, key=len):
            (self.root / rel).mkdir(exist_ok=True)
        for rel, op in self.ops.items():
            path = self.root / rel
            if op.old is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(self.a_bytes[rel])
                os.chmod(path, self.base[rel][1] & 0o7777)
        for rel in sorted(self.created_dirs, key=len, reverse=True):
            if (self.root / rel).is_dir():
                (self.root / rel).rmdir()
        for rel in self.a_bytes:  # only these were rewritten; every other entry keeps its identity
            st = (self.root / rel).stat()
            self.base[rel] = ("f", st.st_mode, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _fault_in_child(plan, spec: str) -> int:
    """Apply under `spec` in a forked child; returns the signal that ended it (0 when it exited)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.environ[faults.ENV] = spec
            faults.reset()
            plan.apply()
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


def _fault_here(plan, spec: str, monkeypatch) -> None:
    monkeypatch.setenv(faults.ENV, spec)
    faults.reset()
    try:
        with pytest.raises(ScaffoldError):
            plan.apply()
    finally:
        monkeypatch.delenv(faults.ENV)
        faults.reset()


def _count_ops(plan) -> int:
    faults.reset()
    plan.apply()
    return faults.count()


def _sweep(tree: Tree, plan, rerun, capsys, monkeypatch) -> dict[str, int]:
    """Every kind at every position, each followed by one command; returns the counts of each outcome."""
    # A SIGKILL keeps the page cache, so fsync changes nothing these faults can observe (it guards
    # against power loss); skipping it keeps ~1,300 positions within CI's time.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    total = _count_ops(plan)
    assert tree.state() == "B"
    tree.reset()
    assert tree.state() == "A"
    outcomes = {"A": 0, "B": 0}
    for kind in KINDS:
        for n in range(1, total + 1):
            spec = f"{kind}:{n}"
            if kind == "kill":
                assert _fault_in_child(plan, spec) == signal.SIGKILL, spec
            else:
                _fault_here(plan, spec, monkeypatch)
            capsys.readouterr()
            left_journal = journal.Paths.of(tree.root).any()
            argv = rerun(kind, n, total)
            main(argv)
            err = capsys.readouterr().err
            assert "internal error" not in err and "could not restore" not in err, (spec, err)
            settled = [line for line in err.splitlines() if "interrupted" in line]
            assert len(settled) == left_journal, (spec, err)  # a journal was found: one line says what was done
            state = tree.state()
            assert state in outcomes, (spec, argv[0], state, err)
            outcomes[state] += 1
            if state == "B":
                tree.reset()
    return {"positions": total, "before": outcomes["A"], "after": outcomes["B"]}


@pytest.fixture(scope="module")
def _copies(tmp_path_factory, pristine):
    return {}


@pytest.fixture
def copies(_copies, tmp_path_factory, pristine, hash_tree):
    """One writable copy per release for the whole module (restored between positions, not re-copied);
    a copy that a test left different from the release (it failed) is dropped, the next test copies afresh."""
    used = []

    def get(version: str) -> Path:
        if version not in _copies:
            dest = tmp_path_factory.mktemp("faults") / version
            shutil.copytree(pristine(version), dest)
            _copies[version] = (dest, hash_tree(dest))
        used.append(version)
        return _copies[version][0]

    yield get
    for version in used:
        root, digest = _copies[version]
        if journal.Paths.of(root).any() or hash_tree(root) != digest:
            del _copies[version]


def _rerun(root: Path, pattern: str):
    """The command run after each fault. `resolve --target` is a real command that settles the journal
    before anything else and then stops at once (not a git tree); at three kill positions per sweep the
    re-run is `check`, `new` or `remove` instead, each settling the journal and then doing its own work."""
    heavy = {
        1: ["check", NAME, "--target", str(root)],
        2: ["new", NAME, "--pattern", pattern, "--target", str(root)],
        3: ["remove", NAME, "--target", str(root)],
    }

    def argv(kind: str, n: int, total: int) -> list[str]:
        quarter = next((q for q in heavy if n == q * total // 4), None)
        if kind == "kill" and quarter:
            return heavy[quarter]
        return ["resolve", "--target", str(root)]

    return argv


@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_fault_position_of_new_ends_original_or_complete(copies, capsys, monkeypatch, version, pattern):
    root = copies(version)
    plan = plan_new(detect_profile(root), make_names(NAME, pattern), parallel=False)
    plan.command = f"omnitts-scaffold new {NAME} --pattern {pattern}"
    tree = Tree(root, plan)
    outcome = _sweep(tree, plan, _rerun(root, pattern), capsys, monkeypatch)
    print(f"new {version} {pattern}: {outcome}")
    assert outcome["positions"] > 2 * len(plan.changes)  # journal, temp writes, renames, cleanup all counted
    assert outcome["before"] and outcome["after"]


@pytest.mark.parametrize("version", RELEASES)
def test_every_fault_position_of_remove_ends_original_or_complete(copies, capsys, monkeypatch, version):
    root = copies(version)
    added = plan_new(detect_profile(root), make_names(NAME, "two-stage"), parallel=False)
    added.apply()
    try:
        plan = plan_remove(detect_profile(root), NAME, parallel=False)
        assert any(op.new is None for op in plan.changes)
        outcome = _sweep(Tree(root, plan), plan, _rerun(root, "two-stage"), capsys, monkeypatch)
        print(f"remove {version}: {outcome}")
        assert outcome["before"] and outcome["after"]
    finally:
        if (root / "vllm_omni/model_executor/models" / NAME).exists():
            plan_remove(detect_profile(root), NAME, parallel=False).apply()


def test_git_tree_keeps_its_journal_in_dot_git(pristine, capsys, tmp_path):
    """With a `.git`, the journal lives there, not in the working tree; every kill position still settles."""
    root = tmp_path / "git-tree"
    shutil.copytree(pristine("0.30.0"), root)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    plan = plan_new(detect_profile(root), make_names(NAME, "native-ar"), parallel=False)
    tree = Tree(root, plan)
    total = _count_ops(plan)
    tree.reset()
    assert journal.Paths.of(root).home == root / ".git"
    for n in range(1, total + 1):
        assert _fault_in_child(plan, f"kill:{n}") == signal.SIGKILL
        assert not (root / ".omnitts-journal").exists()
        capsys.readouterr()
        main(["resolve", "--target", str(root)])
        state = tree.state()
        assert state in ("A", "B"), (n, state)
        if state == "B":
            tree.reset()


def _first_rename_into_the_tree(root: Path, name: str, pattern: str, monkeypatch) -> int:
    """The position of the first rename of a temp file over a tree file (its temp file exists then)."""
    probe = root.parent / "probe"
    shutil.copytree(root, probe)
    seen = []
    real = faults.point
    monkeypatch.setattr(faults, "point", lambda op, path: (seen.append((op, Path(path))), real(op, path)))
    plan_new(detect_profile(probe), make_names(name, pattern), parallel=False).apply()
    monkeypatch.setattr(faults, "point", real)
    shutil.rmtree(probe)
    return next(i for i, (op, path) in enumerate(seen, 1) if op == "replace" and "journal" not in str(path))


def test_the_env_hook_kills_the_real_command_and_the_next_command_says_what_it_settled(tmp_path, pristine, monkeypatch):
    """End to end through the installed entry point: SIGKILL mid-`new`, then `new` again completes it."""
    root = tmp_path / "tree"
    shutil.copytree(pristine("0.20.0"), root)
    argv = [sys.executable, "-m", "omnitts.scaffold.cli", "new", "cli_tts", "--pattern", "single-stage"]
    argv += ["--target", str(root)]
    n = _first_rename_into_the_tree(root, "cli_tts", "single-stage", monkeypatch)
    env = {**os.environ, faults.ENV: f"kill:{n}"}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert (root / ".omnitts-journal").is_dir()
    assert list(root.rglob(f"*{journal.TEMP_SUFFIX}"))  # the killed run's temp file is still there ...
    env.pop(faults.ENV)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("omnitts-scaffold: rolled back the interrupted `omnitts-scaffold new cli_tts"), first
    assert not list(root.rglob(f"*{journal.TEMP_SUFFIX}"))  # ... and gone after the next run
    assert not (root / ".omnitts-journal").exists()
    assert (root / "vllm_omni/model_executor/models/cli_tts/pipeline.py").is_file()


def test_bad_fault_spec_is_a_one_line_error(monkeypatch, tmp_path, pristine):
    root = tmp_path / "tree"
    shutil.copytree(pristine("0.20.0"), root)
    plan = plan_new(detect_profile(root), make_names(NAME, "single-stage"), parallel=False)
    monkeypatch.setenv(faults.ENV, "explode:3")
    faults.reset()
    try:
        with pytest.raises(ScaffoldError, match="OMNITTS_FAULT='explode:3'"):
            plan.apply()
    finally:
        monkeypatch.delenv(faults.ENV)
        faults.reset()
    assert not (root / ".omnitts-journal").exists()


def _small_tree(tmp_path, pristine, version="0.20.0"):
    root = tmp_path / "tree"
    shutil.copytree(pristine(version), root)
    return root, plan_new(detect_profile(root), make_names(NAME, "single-stage"), parallel=False)


def test_a_rollback_that_cannot_restore_names_what_and_keeps_the_journal(tmp_path, pristine, hash_tree, monkeypatch):
    """The model folder turns read-only at its last write: rollback cannot unlink there, says so, keeps the
    journal; the next command (the folder writable again) finishes the rollback."""
    root, plan = _small_tree(tmp_path, pristine)
    before = hash_tree(root)
    tree = Tree(root, plan)
    seen = []
    real = faults.point
    monkeypatch.setattr(faults, "point", lambda op, path: (seen.append((op, Path(path))), real(op, path)))
    faults.reset()
    plan.apply()
    monkeypatch.setattr(faults, "point", real)
    tree.reset()
    assert hash_tree(root) == before
    n = max(i for i, (op, path) in enumerate(seen, 1) if op == "replace" and path.parent.name == NAME)
    monkeypatch.setenv(faults.ENV, f"erofs:{n}")
    faults.reset()
    with pytest.raises(ScaffoldError) as info:
        plan.apply()
    monkeypatch.delenv(faults.ENV)
    faults.reset()
    message = str(info.value)
    assert "(Read-only file system)" in message and "\n" not in message
    assert "rollback could not restore" in message and "finishes the rollback" in message
    assert (root / ".omnitts-journal").is_dir()
    assert main(["check", NAME, "--target", str(root)]) != 0  # settles first, then: no such model
    assert hash_tree(root) == before
    assert not (root / ".omnitts-journal").exists()


def test_a_second_writer_is_refused_while_the_first_holds_the_tree(tmp_path, pristine, hash_tree):
    root, plan = _small_tree(tmp_path, pristine)
    before = hash_tree(root)
    with journal.tree_lock(root):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child: another process trying to write the same tree
            try:
                plan.apply()
            except ScaffoldError as exc:
                os._exit(7 if "another omnitts-scaffold command is writing" in str(exc) else 1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 7
    assert hash_tree(root) == before


def test_an_interrupt_during_apply_restores_the_tree_and_stays_an_interrupt(tmp_path, pristine, hash_tree, monkeypatch):
    root, plan = _small_tree(tmp_path, pristine)
    before = hash_tree(root)
    calls = []
    real = faults.point

    def interrupt(op, path):
        calls.append(op)
        if len(calls) == 30:
            raise KeyboardInterrupt
        real(op, path)

    monkeypatch.setattr(faults, "point", interrupt)
    with pytest.raises(KeyboardInterrupt):
        plan.apply()
    assert hash_tree(root) == before
    assert not (root / ".omnitts-journal").exists()


def test_an_unreadable_journal_is_a_one_line_error(tmp_path, pristine, capsys):
    root, _ = _small_tree(tmp_path, pristine)
    (root / ".omnitts-journal" / "backups").mkdir(parents=True)
    (root / ".omnitts-journal" / "journal.json").write_text("{not json")
    assert main(["check", "qwen3_tts", "--target", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "journal" in err and "is unreadable" in err, err
