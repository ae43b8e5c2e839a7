"""A two-stage model on two devices: the harness's per-stage devices and placement audit, and the engine tier's
per-stage device arguments, on fake device lists (no GPU here; what only two GPUs can show is in docs/validators.md).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from omnitts.reference_models.catalog import get_subject
from omnitts.validators.runtime.harness import ContractError, Harness, loop
from omnitts.validators.runtime.harness.hostcopy import delivered, misplaced


def test_misplaced_names_every_tensor_off_the_expected_device():
    payload = {"codes": {"audio": torch.zeros(4)}, "meta": [torch.ones(1), 3], "sr": torch.tensor(24000)}
    # a fake stage device: every host tensor is off it
    found = misplaced(payload, "cuda:1", "stage 1")
    assert found == [
        "stage 1: codes.audio is on cpu, expected cuda:1",
        "stage 1: meta[0] is on cpu, expected cuda:1",
        "stage 1: sr is on cpu, expected cuda:1",
    ]
    # stage outputs: host tensors (sr, flags) are fine, only another device counts
    assert misplaced(payload, "cuda:1", "stage 1", host_ok=True) == []
    # what crosses to the next stage must be on the host
    assert misplaced(payload, "cpu", "processor") == []
    # "cuda" without an index (one GPU, no split) accepts any CUDA index; a host tensor still is not on it
    assert misplaced({"x": torch.zeros(1)}, "cuda", "s") == ["s: x is on cpu, expected cuda"]


def test_delivered_leaves_host_values_alone():
    t = torch.arange(3)
    chunk = {"codes": {"audio": [1, 2]}, "meta": {"finished": t}, "pair": (t, "x")}
    out = delivered(chunk)
    assert out["meta"]["finished"] is t and out["pair"][0] is t and out["codes"] == {"audio": [1, 2]}


def _two_stage(name: str = "ref_two_stage"):
    subject = get_subject(name).runtime("cpu")
    return subject, [replace(subject.prompts[0], max_tokens=24)]


def test_stage_devices_reach_the_models_and_the_result():
    subject, plans = _two_stage()
    engine = Harness(subject, device="cpu", stage_devices=["cpu", "cpu"])
    assert [st.device for st in engine.stages] == ["cpu", "cpu"] and not engine.split
    run = engine.run(plans)
    assert run.stage_devices == ["cpu", "cpu"] and run.placement_findings == []
    with pytest.raises(ContractError, match="1 stage devices for 2 stages"):
        Harness(subject, stage_devices=["cpu"])


def test_build_puts_each_stage_on_its_device():
    subject, _ = _two_stage()
    seen = []

    class Model:
        def to(self, device):
            seen.append(device)
            return self

        def eval(self):
            return self

    subject.stages = [replace(st, factory=Model) for st in subject.stages]
    subject.build("cuda:0", ["cuda:0", "cuda:1"])
    assert seen == ["cuda:0", "cuda:1"]


def test_a_processor_tensor_left_on_a_device_is_a_finding_and_crosses_on_the_host(monkeypatch):
    """Wiring on the CPU: ``ref_two_stage@codes-on-device`` hands its window as a tensor (on the CPU here, on the
    talker's GPU on a CUDA machine). A stand-in for ``misplaced`` reports every tensor under ``codes`` as if it lay on
    ``cuda:0``; the finding reaches the run's result, and the decoder still gets the codes (audio as the correct
    model's). On CUDA the real ``misplaced`` sees the device itself (docs/validators.md, two-GPU recipe)."""
    calls = []

    def fake(x, expected, where, host_ok=False):
        calls.append(expected)
        codes = (x or {}).get("codes", {}).get("audio") if isinstance(x, dict) else None
        return [f"{where}: codes.audio is on cuda:0, expected {expected}"] if isinstance(codes, torch.Tensor) else []

    monkeypatch.setattr(loop, "misplaced", fake)
    subject, plans = _two_stage("ref_two_stage@codes-on-device")
    engine = Harness(subject, device="cpu")
    engine.cuda = True  # audit as on a CUDA run (every tensor of this run stays on the host)
    bad = engine.run(plans)
    assert set(calls) == {"cpu"}
    assert bad.placement_findings and "codes.audio is on cuda:0" in bad.placement_findings[0]
    assert "stage input processor talker2code2wav_async_chunk" in bad.placement_findings[0]
    good_subject, _ = _two_stage()
    good = Harness(good_subject, device="cpu")
    good.cuda = True
    ok = good.run(plans)
    assert ok.placement_findings == []
    ext = plans[0].ext_id
    torch.testing.assert_close(bad.requests[ext].stream_audio, ok.requests[ext].stream_audio)


def test_the_placement_check_skips_on_cpu(tmp_path):
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[2]
    code = "import sys, pytest; sys.exit(pytest.main(sys.argv[1:]))"
    args = [
        "validators",
        "--model",
        "ref_two_stage",
        "-k",
        "placement",
        "-p",
        "no:xdist",
        "--omnitts-out",
        str(tmp_path),
    ]
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=repo, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    from omnitts.validators.runtime.results import latest_run

    res = json.loads((latest_run(tmp_path) / "results.json").read_text())["models"]["ref_two_stage"]
    assert res["results"]["device.placement"] == "skipped"
    assert "needs --device cuda" in res["failures"]["device.placement"]


# -- engine tier: the per-stage devices of an engine session ---------------------------------------------------------

DEPLOY_TOGETHER = {"stages": [{"stage_id": 0, "devices": "0"}, {"stage_id": 1, "devices": "0"}]}
DEPLOY_2GPU = {"stages": [{"stage_id": 0, "devices": "1"}, {"stage_id": 1, "devices": "0"}]}


def test_engine_session_on_two_gpus_sets_per_stage_devices():
    from omnitts.validators.engine.runtime import stage_placement

    p = stage_placement("0.30.0", DEPLOY_TOGETHER, 2, [0, 1])
    assert p.env() == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert p.omni_kwargs() == {"stage_overrides": {"0": {"devices": "0"}, "1": {"devices": "1"}}}
    assert p.serve_args() == ["--stage-overrides", '{"0": {"devices": "0"}, "1": {"devices": "1"}}']
    # --gpus 3,5: logical indices into CUDA_VISIBLE_DEVICES, as the release maps stage devices
    p = stage_placement("0.30.0", DEPLOY_TOGETHER, 2, [3, 5])
    assert p.env() == {"CUDA_VISIBLE_DEVICES": "3,5"} and p.overrides == {"0": {"devices": "0"}, "1": {"devices": "1"}}
    # a deploy config that spreads the stages is followed
    assert stage_placement("0.30.0", DEPLOY_2GPU, 2, [0, 1]).overrides == {"0": {"devices": "1"}, "1": {"devices": "0"}}


def test_engine_session_keeps_the_deploy_devices_otherwise():
    from omnitts.validators.engine.runtime import StagePlacement, stage_placement

    assert stage_placement("0.30.0", DEPLOY_TOGETHER, 2, None) == StagePlacement()  # CPU session
    one = stage_placement("0.30.0", DEPLOY_TOGETHER, 2, [1])
    assert one.env() == {"CUDA_VISIBLE_DEVICES": "1"} and one.omni_kwargs() == {} and one.serve_args() == []
    assert stage_placement("0.30.0", DEPLOY_TOGETHER, 2, [0, 1], split_stages=False).overrides == {}
    assert stage_placement("0.30.0", {"stages": [{"stage_id": 0}]}, 1, [0, 1]).overrides == {}  # single stage


def test_engine_overrides_exist_only_for_releases_with_an_engine_tier():
    from omnitts.knowledge.engine import NoCpuEngine, stage_device_overrides

    assert stage_device_overrides("0.30.0", ["0", None]) == {"0": {"devices": "0"}}
    with pytest.raises(NoCpuEngine):
        stage_device_overrides("0.20.0", ["0", "1"])


class _Config:
    def __init__(self, **options):
        self.options = {f"omnitts_{k}": v for k, v in options.items()}

    def getoption(self, name, default=None):
        return self.options.get(name, default)


def _tree(tmp_path: Path) -> Path:
    pkg = tmp_path / "vllm_omni" / "model_executor" / "models" / "toy"
    pkg.mkdir(parents=True)
    (pkg / "pipeline.py").write_text(
        "TOY = PipelineConfig(model_type='toy_tts', stages=(StagePipelineConfig(stage_id=0), "
        "StagePipelineConfig(stage_id=1)))\n"
    )
    (tmp_path / "vllm_omni" / "deploy").mkdir(parents=True)
    (tmp_path / "vllm_omni" / "deploy" / "toy_tts.yaml").write_text(
        "stages:\n  - stage_id: 0\n    devices: '0'\n  - stage_id: 1\n    devices: '0'\n"
    )
    return tmp_path


def test_engine_placement_reads_the_trees_deploy_config(tmp_path):
    from omnitts.validators.engine.pytest_options import engine_placement

    tree = _tree(tmp_path)
    cuda = _Config(device="cuda", gpus=None, stage_devices="split")
    p = engine_placement(cuda, tree, "toy", "0.30.0", device_count=2)
    assert p.env() == {"CUDA_VISIBLE_DEVICES": "0,1"} and p.overrides == {"0": {"devices": "0"}, "1": {"devices": "1"}}
    assert engine_placement(_Config(device="cpu"), tree, "toy", "0.30.0", device_count=2).overrides == {}
    with pytest.raises(pytest.UsageError, match="GPU 2 is not visible"):
        engine_placement(_Config(device="cuda", gpus="2", stage_devices="split"), tree, "toy", "0.30.0", device_count=2)


def test_offline_plan_and_server_command_carry_the_overrides(tmp_path, monkeypatch):
    from omnitts.validators.engine import runtime

    placement = runtime.stage_placement("0.30.0", DEPLOY_TOGETHER, 2, [0, 1])
    env = runtime.EngineEnv("0.30.0", Path("/bin/true"), tmp_path, tmp_path, placement)
    assert env.env()["CUDA_VISIBLE_DEVICES"] == "0,1"
    monkeypatch.setattr(env, "run", lambda args, timeout, log: log.write_text("") or None)
    env.offline(tmp_path, {"texts": ["a"]}, tmp_path / "out")
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert plan["stage_overrides"] == {"0": {"devices": "0"}, "1": {"devices": "1"}}
    started = {}

    class Proc:
        def poll(self):
            return 1

        returncode = 1

    def popen(cmd, **kw):
        started["cmd"] = cmd
        return Proc()

    monkeypatch.setattr(runtime.subprocess, "Popen", popen)
    with pytest.raises(runtime.EngineError):
        runtime.Server(env, tmp_path, tmp_path / "server.log").start(timeout=1)
    assert started["cmd"][-2:] == ["--stage-overrides", '{"0": {"devices": "0"}, "1": {"devices": "1"}}']


def test_a_model_context_places_its_stages_from_the_workers_placement(tmp_path):
    """The wiring from the worker's placement to the engine's stage devices (fake GPUs: no model is built)."""
    from omnitts.reference_models import catalog
    from omnitts.validators.runtime.context import CheckFailure, ModelContext, Options
    from omnitts.validators.runtime.placement import place_worker

    def ctx(name, gpus, worker="gw1", split=True):
        placement = place_worker(worker, 2, gpus, split_stages=split)
        return ModelContext(name, Options(device="cuda", out_dir=tmp_path, placement=placement, catalogs=(catalog,)))

    assert ctx("ref_two_stage", [0, 1]).stage_devices() == ["cuda:1", "cuda:0"]
    assert ctx("ref_two_stage", [0, 1], worker="gw0").stage_devices() == ["cuda:0", "cuda:1"]
    assert ctx("ref_two_stage", [0, 1], split=False).stage_devices() == ["cuda:1", "cuda:1"]
    assert ctx("ref_two_stage", [0]).stage_devices() == ["cuda:0", "cuda:0"]
    assert ctx("ref_single_stage", [0, 1]).stage_devices() == ["cuda:1"]
    assert (
        ModelContext("ref_two_stage", Options(device="cpu", out_dir=tmp_path, catalogs=(catalog,))).stage_devices()
        is None
    )
    # a deploy config asking for a second GPU on a one-GPU run: the model's checks fail with one line
    spread = ctx("ref_two_stage", [0])
    spread.subject.extra["deploy"] = DEPLOY_2GPU
    with pytest.raises(CheckFailure, match="stage placement: stage 0: deploy devices name GPU 1, but this run has 1"):
        spread.stage_devices()
