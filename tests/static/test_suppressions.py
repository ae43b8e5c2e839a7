"""Suppression comments: mandatory reason, line or line above, unused and unknown ones reported."""

from __future__ import annotations

from omnitts.validators.static import api

HOT = """import torch


class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        out = []
        for i in range(4):
{lines}
        return out
"""


def _lint(tmp_path, lines: str):
    body = "\n".join("            " + line for line in lines.strip("\n").splitlines())
    p = tmp_path / "vllm_omni/model_executor/models/m/modeling_m.py"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(HOT.format(lines=body))
    return sorted((f.rule, f.line) for f in api.run([p], root=tmp_path).findings)


def test_unsuppressed(tmp_path):
    assert _lint(tmp_path, "out.append(x[i].item())") == [("OMNI-I3-001", 8)]


def test_same_line_with_reason(tmp_path):
    assert _lint(tmp_path, "out.append(x[i].item())  # omnitts: ignore[OMNI-I3-001] x is on the host here") == []


def test_line_above_with_reason(tmp_path):
    assert _lint(tmp_path, "# omnitts: ignore[OMNI-I3-001] measured: one read per step\nout.append(x[i].item())") == []


def test_line_above_only_when_standalone(tmp_path):
    got = _lint(tmp_path, "y = 1  # omnitts: ignore[OMNI-I3-001] wrong line\nout.append(x[i].item())")
    assert ("OMNI-I3-001", 9) in got and ("OMNI-META-003", 8) in got


def test_reasonless_suppresses_nothing(tmp_path):
    got = _lint(tmp_path, "out.append(x[i].item())  # omnitts: ignore[OMNI-I3-001]")
    assert got == [("OMNI-I3-001", 8), ("OMNI-META-002", 8)]


def test_unused_and_unknown(tmp_path):
    got = _lint(tmp_path, "out.append(x[i])  # omnitts: ignore[OMNI-I3-001, OMNI-X-999] stale")
    assert got == [("OMNI-META-003", 8), ("OMNI-META-003", 8)]


def test_wrong_rule_does_not_suppress(tmp_path):
    got = _lint(tmp_path, "out.append(x[i].item())  # omnitts: ignore[OMNI-I3-002] wrong id")
    assert ("OMNI-I3-001", 8) in got and ("OMNI-META-003", 8) in got


def test_malformed_marker(tmp_path):
    got = _lint(tmp_path, "out.append(x[i])  # omnitts: ignore OMNI-I3-001 because")
    assert got == [("OMNI-META-002", 8)]


def test_marker_inside_string_is_not_a_suppression(tmp_path):
    got = _lint(tmp_path, 'out.append(x[i].item()); s = "# omnitts: ignore[OMNI-I3-001] no"')
    assert got == [("OMNI-I3-001", 8)]


def test_yaml_suppression(tmp_path):
    from omnitts.validators.static.rules.integration_config import ArStageConcurrency

    from .cases import write_case

    case = ArStageConcurrency.INVALID[0]
    write_case(tmp_path, case)
    y = tmp_path / case.path
    y.write_text(
        y.read_text().replace(
            "max_num_seqs: 1\n    output",
            "max_num_seqs: 1  # omnitts: ignore[OMNI-INT-001] RNG is process-wide\n    output",
        )
    )
    res = api.run([tmp_path], root=tmp_path, select=["OMNI-INT-001"], integration=True)
    assert [f.rule for f in res.findings] == []
