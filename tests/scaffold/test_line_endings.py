"""Line endings: a shared file written with `\\r\\n` keeps them through `new`, `remove` and `resolve`.

`new` + `remove` on a tree whose shared files (registries, serving, adapters, HF configs, hub READMEs)
use `\\r\\n` gives back every byte, and every line `new` adds ends in `\\r\\n` too; a file that mixes line
endings is refused in one line (which ending would a new line get?).
"""

from __future__ import annotations

import pytest

from omnitts.knowledge import layout
from omnitts.scaffold.cli import main
from omnitts.scaffold.resolve import SHARED_FILES

SHARED = SHARED_FILES  # every shared file a codemod patches


def _to_crlf(root, rels) -> list[str]:
    done = []
    for rel in rels:
        path = root / rel
        if path.is_file():
            path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
            done.append(rel)
    return done


@pytest.mark.parametrize("version", ["0.20.0", "0.30.0"])  # five-point serving + hub READMEs; adapter-only
def test_crlf_shared_files_keep_their_line_endings_through_new_and_remove(work_tree, hash_tree, capsys, version):
    root = work_tree(version)
    converted = _to_crlf(root, SHARED)
    assert layout.REGISTRY in converted and len(converted) >= 4
    before = hash_tree(root)
    assert main(["new", "crlf_tts", "--pattern", "two-stage", "--target", str(root)]) == 0
    patched = [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith("patched")]
    assert set(patched) >= {layout.REGISTRY, layout.HF_CONFIGS}, patched
    for rel in patched:
        data = (root / rel).read_bytes()
        assert b"crlf_tts" in data or b"CrlfTts" in data, rel
        assert data.count(b"\n") == data.count(b"\r\n"), f"{rel}: a line without \\r\\n"
    assert main(["remove", "crlf_tts", "--target", str(root)]) == 0
    assert hash_tree(root) == before


def test_mixed_line_endings_are_refused_in_one_line(work_tree, hash_tree, capsys):
    root = work_tree("0.30.0")
    path = root / layout.REGISTRY
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n", 3))
    before = hash_tree(root)
    assert main(["new", "mixed_tts", "--pattern", "single-stage", "--target", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{layout.REGISTRY} mixes line endings" in err, err
    assert hash_tree(root) == before


def test_the_merge_driver_keeps_crlf(tmp_path):
    texts = {
        "base": 'A = {\r\n    "x": 1,\r\n}\r\n',
        "ours": 'A = {\r\n    "x": 1,\r\n    "o": 2,\r\n}\r\n',
        "theirs": 'A = {\r\n    "x": 1,\r\n    "t": 3,\r\n}\r\n',
    }
    for label, text in texts.items():
        (tmp_path / label).write_bytes(text.encode())
    assert main(["resolve", *(str(tmp_path / label) for label in texts), "--path", "registry.py"]) == 0
    assert (tmp_path / "ours").read_bytes() == b'A = {\r\n    "x": 1,\r\n    "o": 2,\r\n    "t": 3,\r\n}\r\n'
