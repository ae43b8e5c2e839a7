"""Baseline ratchet: line-number-free fingerprints, new findings fail, fixed ones pass with a notice,
full scans reject stale entries."""

from __future__ import annotations

import json

from omnitts.validators.static.cli import main

MODEL = """import torch


class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        out = []
        for i in range(4):
            out.append(x[i].item())
{extra}
        return out
"""


def _tree(tmp_path, extra: str = "", prefix: str = ""):
    p = tmp_path / "pkg" / "modeling_m.py"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(prefix + MODEL.format(extra=extra))
    return p


def _run(tmp_path, *args):
    return main([str(tmp_path / "pkg"), "--no-cache", "--baseline", str(tmp_path / "bl.json"), *args])


def test_adopt_then_only_new_findings_fail(tmp_path, capsys):
    _tree(tmp_path)
    assert main([str(tmp_path / "pkg"), "--no-cache"]) == 1
    assert (
        main(
            [
                str(tmp_path / "pkg"),
                "--no-cache",
                "--write-baseline",
                str(tmp_path / "bl.json"),
                "--reason",
                "legacy, tracked in #1",
            ]
        )
        == 0
    )
    entry = json.loads((tmp_path / "bl.json").read_text())["entries"][0]
    assert set(entry) == {"path", "rule", "symbol", "hash", "count", "reason"} and "line" not in entry
    assert _run(tmp_path) == 0
    _tree(tmp_path, extra="            out.append(x[i].tolist())")
    capsys.readouterr()
    assert _run(tmp_path) == 1
    assert "OMNI-I3-002" in capsys.readouterr().out


def test_moving_code_keeps_the_entry(tmp_path):
    _tree(tmp_path)
    main([str(tmp_path / "pkg"), "--no-cache", "--write-baseline", str(tmp_path / "bl.json"), "--reason", "legacy"])
    _tree(tmp_path, prefix="# a comment\n\nCONST = 1\n\n\n")  # every line moves down
    assert _run(tmp_path) == 0


def test_fixed_finding_passes_with_notice_and_full_scan_rejects_stale(tmp_path, capsys):
    _tree(tmp_path)
    main([str(tmp_path / "pkg"), "--no-cache", "--write-baseline", str(tmp_path / "bl.json"), "--reason", "legacy"])
    p = tmp_path / "pkg" / "modeling_m.py"
    p.write_text(p.read_text().replace("x[i].item()", "x[i]"))
    capsys.readouterr()
    assert main([str(p), "--no-cache", "--baseline", str(tmp_path / "bl.json")]) == 0
    assert "lower its count" in capsys.readouterr().err
    assert _run(tmp_path, "--full-scan") == 1
    assert "stale baseline entry" in capsys.readouterr().err


def test_baseline_needs_reason(tmp_path, capsys):
    _tree(tmp_path)
    assert main([str(tmp_path / "pkg"), "--no-cache", "--write-baseline", str(tmp_path / "bl.json")]) == 2
    (tmp_path / "bl.json").write_text(
        json.dumps(
            {
                "version": 1,
                "entries": [
                    {
                        "path": "pkg/modeling_m.py",
                        "rule": "OMNI-I3-001",
                        "symbol": "M.forward",
                        "hash": "x",
                        "count": 1,
                        "reason": "",
                    }
                ],
            }
        )
    )
    assert _run(tmp_path) == 2
    assert "no reason" in capsys.readouterr().err


def test_missing_baseline_fails_closed(tmp_path):
    _tree(tmp_path)
    assert _run(tmp_path) == 2
