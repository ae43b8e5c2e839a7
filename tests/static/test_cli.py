"""omnitts-lint: formats, exit codes, rule docs, fail-closed behaviour, cache."""

from __future__ import annotations

import json
import time

import pytest

from omnitts.validators.static import linter
from omnitts.validators.static.cli import main

BAD = """import torch


class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        out = []
        for i in range(4):
            out.append(x[i].item())
        return out
"""


@pytest.fixture
def bad(tmp_path, monkeypatch):
    monkeypatch.setenv("OMNITTS_CACHE", str(tmp_path / "cache"))
    p = tmp_path / "m.py"
    p.write_text(BAD)
    return p


def test_exit_codes(tmp_path, bad, capsys):
    good = tmp_path / "g.py"
    good.write_text("x = 1\n")
    assert main([str(good)]) == 0
    assert main([str(bad)]) == 1
    assert main([str(tmp_path / "missing.py")]) == 2
    assert main([]) == 2
    assert main([str(bad), "--select", "NOPE"]) == 2
    assert main([str(bad), "--format", "xml"]) == 2
    assert main(["--rule", "OMNI-NOPE-001"]) == 2


def test_json_format(bad, capsys):
    assert main([str(bad), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, list) and len(data) == 1
    assert {"path", "line", "col", "rule", "invariant", "severity", "message"} <= set(data[0])
    assert data[0]["rule"] == "OMNI-I3-001" and data[0]["invariant"] == "I3" and data[0]["line"] == 8


def test_github_format(bad, capsys):
    main([str(bad), "--format", "github"])
    line = capsys.readouterr().out.strip()
    assert line.startswith("::error file=") and ",line=8,col=" in line and "title=OMNI-I3-001::" in line


def test_sarif_is_valid_2_1_0(bad, capsys):
    main([str(bad), "--format", "sarif"])
    log = json.loads(capsys.readouterr().out)
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    ids = [r["id"] for r in driver["rules"]]
    assert len(ids) == len(set(ids)) and set(ids) >= set(linter.all_rules())
    for res in run["results"]:
        assert driver["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["level"] in ("error", "warning", "note", "none")
        region = res["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert res["message"]["text"] and res["partialFingerprints"]
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return
    # Full schema validation when jsonschema and the schema file are available offline.


def test_select_by_invariant(bad, capsys):
    assert main([str(bad), "--select", "I5"]) == 0
    assert main([str(bad), "--select", "OMNI-I3"]) == 1


def test_list_and_explain(capsys):
    assert main(["--list-rules"]) == 0
    out = capsys.readouterr().out
    assert all(rid in out for rid in linter.all_rules())
    assert main(["--rule", "OMNI-I3-004"]) == 0
    out = capsys.readouterr().out
    assert "Why:" in out and "Fix:" in out and "fill_" in out


def test_internal_error_fails_closed(bad, monkeypatch, capsys):
    def crash(self, src):
        raise RuntimeError("boom")

    monkeypatch.setattr(linter.all_rules()["OMNI-I3-001"], "check", crash)
    assert main([str(bad), "--no-cache"]) == 3
    assert "internal error in OMNI-I3-001" in capsys.readouterr().out


def test_integration_without_tree_fails_closed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["--integration"]) == 2


def test_parse_error_is_a_finding_not_a_crash(tmp_path, capsys):
    p = tmp_path / "broken.py"
    p.write_text("def f(:\n")
    assert main([str(p), "--format", "json", "--no-cache"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["rule"] == "OMNI-META-001"


def test_warm_cache_is_used_and_invalidated(tmp_path, bad, capsys):
    for i in range(30):
        (tmp_path / f"f{i}.py").write_text(BAD if i % 3 == 0 else "x = 1\n")
    assert main([str(tmp_path), "--jobs", "1"]) == 1
    cold = capsys.readouterr().out
    t = time.perf_counter()
    assert main([str(tmp_path), "--jobs", "1"]) == 1
    assert time.perf_counter() - t < 0.5
    assert capsys.readouterr().out == cold
    (tmp_path / "f1.py").write_text(BAD)  # content change -> re-linted
    main([str(tmp_path), "--jobs", "1"])
    assert "f1.py" in capsys.readouterr().out


def test_fix_rewrites_and_rechecks(tmp_path, capsys):
    p = tmp_path / "m.py"
    p.write_text(BAD.replace("out.append(x[i].item())", "self.buf.fill_(x[i].item())"))
    assert main([str(p), "--fix", "--no-cache"]) == 0
    assert "self.buf.copy_(x[i])" in p.read_text()
