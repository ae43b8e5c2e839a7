"""omnitts-lint never crashes and never passes silently: seeded generated programs (and their
byte-level variants and damaged copies), pathological nesting, odd encodings and special files.

"Crash" means any exception out of the engine, an OMNI-META-004 (internal error) finding, or exit 3
where the input is merely odd. Unreadable or special inputs must be findings or errors that name
the file, and must not stop the rest of the run. ~20 s on 2 cores; OMNITTS_FUZZ_PROGRAMS=N runs more.
"""

from __future__ import annotations

import ast
import os
import random
import socket
import subprocess
import sys
import warnings

import pytest

from omnitts.knowledge.treefacts import TreeFacts
from omnitts.validators.static import linter
from omnitts.validators.static.cli import main

from .fuzz_programs import PLANTED, ProgramGenerator, damaged, variants

N_PROGRAMS = int(os.environ.get("OMNITTS_FUZZ_PROGRAMS", "90"))
MODEL_REL = "vllm_omni/model_executor/models/fuzz/fuzz.py"
RULES = linter.select_rules(None)


def lint(data: bytes, rel: str = MODEL_REL):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # generated code has `'x' is 1` style oddities
        found, _ = linter.lint_source("fuzz.py", rel, data, TreeFacts(), RULES)
    crashed = [f for f in found if f.rule == "OMNI-META-004"]
    assert not crashed, f"internal error on generated input: {crashed[0].message}\n---\n{data[:3000]!r}"
    return found


def parses(data: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            ast.parse(data)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def key(found) -> list[tuple]:
    return sorted((f.line, f.col, f.rule, f.message) for f in found)


@pytest.mark.parametrize("chunk", range(3))
def test_generated_programs_never_crash_and_lint_alike_in_every_encoding(chunk):
    per_chunk = max(1, N_PROGRAMS // 3)
    checked = 0
    for seed in range(chunk * per_chunk, (chunk + 1) * per_chunk):
        r = random.Random(seed)
        text = ProgramGenerator(seed).program()
        found = lint(text.encode())
        if parses(text.encode()):
            assert not any(f.rule == "OMNI-META-001" for f in found), (seed, text)
            checked += 1
        # Same module, other bytes: identical findings (a shifted line number or a lost finding is a bug).
        for name, (reference, variant) in variants(text, r).items():
            if name in ("crlf", "cr", "mixed", "bom", "formfeed"):
                want = key(found)
            else:
                want = key(lint(reference))
            assert key(lint(variant)) == want, (seed, name, text)
        for broken in damaged(text, r):
            found = lint(broken)
            if not parses(broken):  # never a silent pass on a file Python cannot read
                assert any(f.rule == "OMNI-META-001" for f in found), (seed, broken[:400])
    assert checked > per_chunk // 2  # the generator mostly writes valid Python


def test_planted_violation_is_found_in_every_byte_variant():
    r = random.Random(7)
    base = key(lint(PLANTED.encode()))
    assert any(rule == "OMNI-I3-001" for _l, _c, rule, _m in base)
    for name, (reference, variant) in variants(PLANTED, r).items():
        assert key(lint(variant)) == key(lint(reference)), name
        assert any(f.rule == "OMNI-I3-001" for f in lint(variant)), name


def test_model_hooks_with_odd_spacing_are_models():
    for head in ("def forward (self, x):", "async def forward(self, x):", "def  forward( self, x ):"):
        src = PLANTED.replace("def forward(self, x: torch.Tensor):", head).replace("x: torch.Tensor", "x")
        assert any(f.rule == "OMNI-I3-001" for f in lint(src.encode())), head


# --- pathological inputs ------------------------------------------------------------------------
DEEP = {
    "sum-20k": "x = " + "+".join(["1"] * 20_000) + "\n",
    "attribute-chain-50k": "x = a" + ".b" * 50_000 + "\n",
    "call-chain-30k": "x = f" + "()" * 30_000 + "\n",
    "subscripts-20k": "x = a" + "[0]" * 20_000 + "\n",
    "unary-5k": "x = " + "-" * 5_000 + "1\n",
    "nested-lists-150": "x = " + "[" * 150 + "]" * 150 + "\n",
    "nested-ifs-99": "".join(" " * i + "if x:\n" for i in range(99)) + " " * 99 + "pass\n",
    "long-line-300kb": "x = [" + "1, " * 100_000 + "]\n",
    "deep-in-a-hot-loop": "import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
    "        for i in range(3):\n            y = " + "+".join(["x[i].item()"] * 3_000) + "\n        return y\n",
}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_deep_and_huge_expressions_are_checked_or_named(name):
    data = DEEP[name].encode()
    found = lint(data)  # no exception, no internal error
    metas = [f for f in found if f.rule == "OMNI-META-001"]
    if parses(data):
        assert not metas, metas
    if name == "deep-in-a-hot-loop":
        assert any(f.rule == "OMNI-I3-001" for f in found)


def test_nesting_beyond_any_limit_is_a_finding_not_a_crash(tmp_path, capsys):
    p = tmp_path / "deepest.py"
    p.write_text("x = " + "+".join(["1"] * 300_000) + "\n")  # CPython's AST builder allows 3 x the limit
    q = tmp_path / "nots.py"
    q.write_text("x = " + "not " * 100_000 + "1\n")
    assert main([str(p), str(q), "--no-cache", "--no-baseline", "-j", "1"]) == 1
    out = capsys.readouterr().out
    assert f"{p.name}:1:1: OMNI-META-001" in out.replace(str(tmp_path) + os.sep, "") and "too deeply" in out
    assert "nots.py" in out and "nesting too deep for CPython" in out


ODD_BYTES = {
    "empty": b"",
    "only-bom": b"\xef\xbb\xbf",
    "null-byte": b"x = 1\x00\n",
    "invalid-utf8": b"x = '\xff\xfe'\n",
    "utf16-bom": "x = 1\n".encode("utf-16"),
    "unknown-codec": b"# -*- coding: klingon -*-\nx = 1\n",
    "latin1-cookie": "# -*- coding: latin-1 -*-\nx = 'caf\u00e9'\n".encode("latin-1"),
    "cr-only": b"import torch\rx = 1\r",
    "tabs-and-spaces": b"if x:\n\tpass\n        pass\n",
    "binary": bytes(range(256)) * 4,
    "gigantic-int": b"x = " + b"9" * 100_000 + b"\n",
}


@pytest.mark.parametrize("name", sorted(ODD_BYTES))
def test_odd_bytes_parse_or_are_named(name):
    data = ODD_BYTES[name]
    found = lint(data)
    if not parses(data):
        assert [f.rule for f in found] == ["OMNI-META-001"], found


def _special_tree(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(PLANTED)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    os.mkfifo(tmp_path / "fifo.py")
    folder = tmp_path / "folder.py"
    folder.mkdir()
    (folder / "inside.py").write_text(PLANTED)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock.py"))
    return bad, sock


def test_special_files_in_a_walk_are_named_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bad, sock = _special_tree(tmp_path)
    try:
        code = main([".", "--no-cache", "--no-baseline", "-j", "1"])
    finally:
        sock.close()
    out, err = capsys.readouterr()
    assert code == 3, (out, err)  # a file could not be read: internal-error exit, as documented
    assert "bad.py:9:" in out and "folder.py/inside.py:9:" in out  # the rest was linted
    for name, why in (
        ("dangling.py", "dangling symbolic link"),
        ("loop.py", "cannot read loop.py"),
        ("fifo.py", "not a regular file (a FIFO)"),
        ("sock.py", "not a regular file (a socket)"),
    ):
        line = next((x for x in out.splitlines() if x.startswith(name + ":")), "")
        assert "OMNI-META-004" in line and why in line, (name, out)
    assert "Traceback" not in err


def test_special_files_named_explicitly(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bad, sock = _special_tree(tmp_path)
    sock.close()
    assert main(["fifo.py", "bad.py", "--no-cache", "--no-baseline"]) == 3
    out = capsys.readouterr().out
    assert "fifo.py:1:1: OMNI-META-004" in out and "bad.py:9:" in out
    assert main(["dangling.py", "bad.py", "--no-cache", "--no-baseline", "--format", "json"]) == 3
    out, err = capsys.readouterr()
    assert "dangling symbolic link" in out and "dangling.py was not (fully) checked" in err
    # A folder named *.py is a folder: walked.
    assert main(["folder.py", "--no-cache", "--no-baseline"]) == 1
    assert "folder.py/inside.py:9:" in capsys.readouterr().out
    # A path that does not exist: named, the others still linted, exit 2.
    assert main(["missing.py", "bad.py", "--no-cache", "--no-baseline"]) == 2
    out, err = capsys.readouterr()
    assert "bad.py:9:" in out and "no such file or directory: missing.py" in err
    # An empty folder named *.py: said, not silently passed.
    (tmp_path / "empty.py").mkdir()
    assert main(["empty.py", "--no-cache", "--no-baseline"]) == 0
    assert "empty.py is a directory without Python files" in capsys.readouterr().err


def test_unreadable_file_is_named_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(PLANTED)
    (tmp_path / "secret.py").write_text("x = 1\n")
    real = linter.read_source

    def read(path):  # root reads anything, so deny the way the kernel would
        if os.path.basename(path) == "secret.py":
            raise OSError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(linter, "read_source", read)
    assert main([".", "--no-cache", "--no-baseline", "-j", "1"]) == 3
    out = capsys.readouterr().out
    assert "secret.py:1:1: OMNI-META-004" in out and "Permission denied" in out and "bad.py:9:" in out


# --- CLI manners ----------------------------------------------------------------------------------
def _closed_pipe(args: list[str]) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(
        [sys.executable, "-m", "omnitts.validators.static.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader is gone before the command writes anything (`| head` that exits)
    err = proc.stderr.read().decode()
    return subprocess.CompletedProcess(args, proc.wait(timeout=120), "", err)


def test_closed_pipe_exits_quietly(tmp_path):
    res = _closed_pipe(["--list-rules"])
    assert res.returncode == 0 and "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr
    bad = tmp_path / "bad.py"
    bad.write_text(PLANTED)
    res = _closed_pipe([str(bad), "--no-cache", "--no-baseline", "--format", "json"])
    assert res.returncode == 1, res.stderr  # the lint's own verdict, not an internal error
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr


def test_clean_run_says_what_it_checked(tmp_path, capsys):
    good = tmp_path / "good.py"
    good.write_text("x = 1\n")
    assert main([str(good), "--no-cache", "--no-baseline"]) == 0
    err = capsys.readouterr().err
    assert "1 file(s)" in err and "rule(s)" in err and "no findings" in err
