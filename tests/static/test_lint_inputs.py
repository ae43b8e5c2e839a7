"""What omnitts-lint reads: any path list without a crash, and no file past the size bound.

A looping symlink as the first path crashed the run (the baseline search resolved it); a 1 GB file was
read whole, decoded and parsed (3.2 GB peak RSS, then a silent pass). Now a path that leads nowhere is
a finding naming it, wherever it is in the list, and a file over `linter.MAX_SOURCE_BYTES` is not read:
an OMNI-META-001 finding names it (exit 1), and the run's memory stays that of an empty run.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from omnitts.validators.static import linter
from omnitts.validators.static.cli import main

CLEAN = "x = 1\n"


@pytest.fixture
def lint_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ok.py").write_text(CLEAN)
    return tmp_path


@pytest.mark.parametrize(
    "paths",
    [["loop", "ok.py"], ["ok.py", "loop"], ["loop"], ["loop.py", "ok.py"], ["ring_a", "ok.py"], ["gone", "ok.py"]],
)
def test_a_symlink_that_leads_nowhere_is_a_finding_anywhere_in_the_path_list(lint_dir, capsys, paths):
    (lint_dir / "loop").symlink_to("loop")
    (lint_dir / "loop.py").symlink_to("loop.py")
    (lint_dir / "ring_a").symlink_to("ring_b")
    (lint_dir / "ring_b").symlink_to("ring_a")
    (lint_dir / "gone").symlink_to("nowhere")
    code = main([*paths, "--no-cache", "-j", "1"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    assert code == 3, (out, err)  # a file that could not be read (docs/lint.md)
    assert f"{paths[0]}:1:1: OMNI-META-004" in out or f"{paths[1]}:1:1: OMNI-META-004" in out, out
    assert f"cannot read {next(p for p in paths if p != 'ok.py')}:" in out, out
    assert err.strip().splitlines()[-1].startswith("omnitts-lint: "), err


def test_a_file_over_the_bound_is_named_and_not_read(lint_dir, capsys, monkeypatch):
    big = lint_dir / "big.py"
    with open(big, "wb") as f:  # sparse: 1 GiB of size, no disk
        f.truncate(2**30)
    reads = []
    real_read = linter.os.read
    monkeypatch.setattr(linter.os, "read", lambda fd, n: reads.append(n) or real_read(fd, n))
    code = main(["big.py", "ok.py", "--no-cache", "-j", "1"])
    out, _ = capsys.readouterr()
    assert code == 1, out
    assert "big.py:1:1: OMNI-META-001" in out and "1,073,741,824 bytes is larger than the 16 MiB" in out, out
    assert sum(reads) < 2**20  # ok.py only: not a byte of big.py


def test_a_file_just_over_the_bound_is_refused_and_one_at_it_is_linted(lint_dir, capsys):
    at = lint_dir / "at.py"
    at.write_bytes(b"#" * (linter.MAX_SOURCE_BYTES - 1) + b"\n")
    over = lint_dir / "over.py"
    over.write_bytes(b"#" * linter.MAX_SOURCE_BYTES + b"\n")
    code = main(["at.py", "over.py", "--no-cache", "-j", "1"])
    out, _ = capsys.readouterr()
    assert code == 1 and "over.py:1:1: OMNI-META-001" in out and "at.py" not in out.replace("over.py", ""), out


def test_peak_memory_on_a_1_gib_file_stays_that_of_a_small_run(lint_dir):
    """Peak RSS of the lint subprocess on a (sparse) 1 GiB file: was 3.2 GB; the bound is 10x an empty run's."""
    with open(lint_dir / "big.py", "wb") as f:
        f.truncate(2**30)
    code = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run([sys.executable, '-m', 'omnitts.validators.static.cli', *sys.argv[1:], '--no-cache',"
        " '-j', '1'], capture_output=True)\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    peaks = {}
    for target in ("ok.py", "big.py"):
        proc = subprocess.run([sys.executable, "-c", code, target], capture_output=True, text=True, timeout=600)
        rc, kib = proc.stdout.split()
        peaks[target] = (int(rc), int(kib))
    assert peaks["big.py"][0] == 1 and peaks["ok.py"][0] == 0, peaks
    assert peaks["big.py"][1] < 10 * peaks["ok.py"][1], peaks
