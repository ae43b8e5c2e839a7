"""`omnitts-scaffold check NAME`: each integration point of the tree's era present, missing or inconsistent."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from omnitts.knowledge import layout
from omnitts.knowledge.eras import ADAPTER, LEGACY, detect_profile
from omnitts.scaffold.check import INCONSISTENT, MISSING, NA, PRESENT, check_model, check_view, tts_candidates
from omnitts.scaffold.cli import main
from omnitts.scaffold.index import TreeIndex
from omnitts.scaffold.naming import make_names
from omnitts.scaffold.new import plan_new

REPO = Path(__file__).resolve().parents[2]


def reports(pristine, version):
    index = TreeIndex(detect_profile(pristine(version)))
    return {r.view.label: r for r in (check_view(index, v) for v in tts_candidates(index))}


def test_every_served_model_of_030_is_complete(pristine):
    found = reports(pristine, "0.30.0")
    served = {label: r for label, r in found.items() if r.view.model_type}
    assert len(served) >= 23 and {"qwen3_tts", "fish_tts", "moss_tts_nano", "voxcpm2", "gepard", "omnivoice"} <= set(
        served
    )
    assert {label: [(g.point, g.detail) for g in r.gaps] for label, r in served.items() if not r.complete} == {}


def test_real_gaps_are_reported(pristine):
    r028 = reports(pristine, "0.28.0")
    # dots_tts and gepard shipped in 0.28.0 without an adapter; dots_tts resolves to VoxCPM2 by its stage key.
    assert r028["dots_tts"].status("adapter") == MISSING
    assert r028["dots_tts"].status("adapter.detect") == INCONSISTENT
    assert "-> 'voxcpm2'" in next(g.detail for g in r028["dots_tts"].gaps if g.point == "adapter.detect")
    assert r028["gepard"].status("adapter") == MISSING and r028["gepard"].status("adapter.detect") == MISSING
    assert r028["voxcpm2"].complete and r028["qwen3_tts"].complete
    r022 = reports(pristine, "0.22.0")
    assert r022["covo_audio"].status("serving.validate") == MISSING
    r024 = reports(pristine, "0.24.0")
    assert r024["ming_flash_omni_tts"].status("adapter") == MISSING
    assert r024["step_audio2"].status("pipeline") == MISSING  # legacy stage_configs topology
    r020 = reports(pristine, "0.20.0")
    assert r020["fish_tts"].status("tests") == MISSING  # the sdist has no e2e test for it
    assert r020["qwen3_tts"].complete and r020["moss_tts_nano"].complete


@pytest.mark.parametrize("version", ["0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0"])
def test_a_scaffolded_model_is_complete(work_tree, version):
    root = work_tree(version)
    profile = detect_profile(root)
    plan_new(profile, make_names("fresh_tts", "two-stage"), parallel=False).apply()
    (report,) = check_model(profile, "fresh_tts")
    assert report.complete, [(g.point, g.detail) for g in report.gaps]
    expected = {"package", "registry", "hf_config", "processor"}
    # 0.18: the stage_args yaml is the topology (no pipeline.py, deploy/ or pipeline registry in that era).
    expected |= {"stage_config"} if profile.era == LEGACY else {"pipeline", "deploy", "pipeline_registry"}
    expected |= (
        {"serving.constant", "serving.union", "serving.detect"} if profile.era != ADAPTER else {"adapter.detect"}
    )
    expected |= (
        {"adapter", "adapter_import", "adapter.stage_keys"}
        if profile.has_adapters
        else {"serving.validate", "serving.build"}
    )
    if profile.has_sources:
        expected |= {"examples", "tests"} | ({"hub_readme"} if version != "0.18.0" else set())  # 0.18: no hubs
    assert {r.point for r in report.results if r.status == PRESENT} == expected
    assert {r.point for r in report.results} <= {p.id for p in profile.points}  # only the era's points


def test_stage_key_in_the_pipeline_but_not_in_the_adapter_is_inconsistent(work_tree):
    root = work_tree("0.30.0")
    profile = detect_profile(root)
    plan_new(profile, make_names("drift_tts", "single-stage"), parallel=False).apply()
    adapter = root / layout.ADAPTERS / "drift_tts.py"
    adapter.write_text(
        adapter.read_text().replace('stage_keys = frozenset({"drift_tts"})', 'stage_keys = frozenset({"drift_v2"})')
    )
    (report,) = check_model(profile, "drift_tts")
    assert report.status("adapter.stage_keys") == INCONSISTENT
    assert "entry stage 'drift_tts'" in next(g.detail for g in report.gaps if g.point == "adapter.stage_keys")
    assert report.status("adapter.detect") in (MISSING, INCONSISTENT)


def test_hybrid_serving_constant_dropped_from_the_union_is_inconsistent(work_tree):
    root = work_tree("0.24.0")
    profile = detect_profile(root)
    plan_new(profile, make_names("half_tts", "single-stage"), parallel=False).apply()
    serving = root / layout.SERVING
    serving.write_text(serving.read_text().replace("    | _HALF_TTS_TTS_MODEL_STAGES\n", ""))
    (report,) = check_model(profile, "half_tts")
    assert report.status("serving.union") == INCONSISTENT
    assert report.status("serving.constant") == PRESENT


def test_names_a_model_by_type_pipeline_key_or_folder(pristine):
    profile = detect_profile(pristine("0.30.0"))
    by = {q: check_model(profile, q) for q in ("fish_tts", "fish_qwen3_omni", "fish_speech")}
    assert {q: [r.view.model_type for r in rs] for q, rs in by.items()} == {q: ["fish_tts"] for q in by}
    (omnivoice,) = check_model(profile, "omnivoice")
    assert omnivoice.view.diffusion and omnivoice.status("adapter.detect") == NA and omnivoice.complete


def test_cli_exit_codes_and_output(pristine, capsys):
    assert main(["check", "qwen3_tts", "--target", str(pristine("0.30.0"))]) == 0
    out = capsys.readouterr().out
    assert "=> complete" in out and "adapter.detect" in out
    assert main(["check", "gepard", "--target", str(pristine("0.28.0"))]) == 1
    assert "gap(s): adapter, adapter.detect" in capsys.readouterr().out
    assert main(["check", "no_such_tts", "--target", str(pristine("0.30.0"))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no model 'no_such_tts'" in err
    assert main(["check", "qwen3_tts", "--target", str(pristine("0.16.0"))]) == 2
    assert "single-model serving (0.14-0.16)" in capsys.readouterr().err
    assert main(["check", "qwen3_tts", "--target", str(pristine("0.18.0"))]) == 1  # 0.18 is checked: its gaps
    assert "stage_config      present" in capsys.readouterr().out


def test_committed_report_is_generated_and_every_gap_is_explained():
    spec = importlib.util.spec_from_file_location("check_report", REPO / "scripts" / "check_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = module.render()  # raises when a gap has no explanation
    assert (REPO / "docs" / "check_report.md").read_text(encoding="utf-8") == text
    assert "UNEXPLAINED" not in text
    table_030 = text.split("## 0.30.0")[1].split("## ")[0]
    served_rows = [line for line in table_030.splitlines() if line.startswith("| `")]
    assert served_rows and all(re.search(r"\|  \|$", line) for line in served_rows)  # no gaps in any served row
