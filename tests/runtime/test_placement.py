"""GPU placement of xdist workers and of a model's stages, on fake device lists (no GPU needed)."""

from __future__ import annotations

import pytest

from omnitts.validators.runtime.placement import (
    PlacementError,
    parse_gpus,
    place_worker,
    stage_devices,
    worker_index,
)


def test_gpus_default_to_every_visible_device():
    assert parse_gpus(None, 2) == [0, 1]
    assert parse_gpus("", 1) == [0]


def test_gpus_list_is_checked_against_visible_devices():
    assert parse_gpus("1, 0", 2) == [1, 0]
    for spec, message in (("0,2", "not visible"), ("0,0", "twice"), ("a", "not a GPU index"), ("-1", "not a GPU")):
        with pytest.raises(PlacementError, match=message):
            parse_gpus(spec, 2)
    with pytest.raises(PlacementError, match="none is visible"):
        parse_gpus(None, 0)


def test_worker_ids():
    assert worker_index(None) == 0
    assert worker_index("master") == 0
    assert worker_index("gw11") == 11
    with pytest.raises(PlacementError):
        worker_index("worker-1")


def test_workers_round_robin_over_two_gpus():
    placed = [place_worker(f"gw{i}", 4, [0, 1]) for i in range(4)]
    assert [p.gpu for p in placed] == [0, 1, 0, 1]
    assert [p.device for p in placed] == ["cuda:0", "cuda:1", "cuda:0", "cuda:1"]
    assert all(p.sharing == 2 for p in placed)
    assert all(p.memory_fraction == pytest.approx(0.45) for p in placed)


def test_uneven_workers_share_memory_by_their_own_gpu_load():
    placed = [place_worker(f"gw{i}", 3, [0, 1]) for i in range(3)]
    assert [(p.gpu, p.sharing) for p in placed] == [(0, 2), (1, 1), (0, 2)]
    assert placed[1].memory_fraction == pytest.approx(0.9)
    assert placed[0].memory_fraction == pytest.approx(0.45)


def test_gpus_list_order_is_the_assignment_order():
    assert [place_worker(f"gw{i}", 2, [3, 1]).gpu for i in range(2)] == [3, 1]


def test_several_workers_on_one_gpu_split_it():
    placed = [place_worker(f"gw{i}", 3, [0]) for i in range(3)]
    assert {p.gpu for p in placed} == {0}
    assert sum(p.memory_fraction for p in placed) <= 0.9 + 1e-9


def test_no_xdist_is_one_worker_with_the_whole_gpu():
    p = place_worker(None, 1, [0, 1])
    assert (p.worker, p.gpu, p.sharing, p.memory_fraction) == ("master", 0, 1, 0.9)


def test_worker_outside_the_run_is_an_error():
    with pytest.raises(PlacementError, match="outside"):
        place_worker("gw4", 2, [0])


def test_stages_together_follow_the_workers_gpu():
    # the scaffold's deploy files keep both stages on "0": they run on the worker's own GPU
    assert stage_devices(["0", "0"], [0, 1], home=1) == ["cuda:1", "cuda:1"]
    assert stage_devices([None], [0, 1]) == ["cuda:0"]


def test_stages_follow_a_2gpu_deploy_file():
    # like vLLM-Omni's fish_qwen3_omni_2gpu.yaml: AR on "0", decoder on "1"
    assert stage_devices(["0", "1"], [0, 1]) == ["cuda:0", "cuda:1"]
    assert stage_devices(["0", "1"], [2, 3]) == ["cuda:2", "cuda:3"]
    assert stage_devices(["0,1", "1"], [0, 1]) == ["cuda:0", "cuda:1"]


def test_split_stages_crosses_devices_from_the_home_gpu():
    assert stage_devices(["0", "0"], [0, 1], home=0, split_stages=True) == ["cuda:0", "cuda:1"]
    assert stage_devices(["0", "0"], [0, 1], home=1, split_stages=True) == ["cuda:1", "cuda:0"]
    # one GPU: nothing to split
    assert stage_devices(["0", "0"], [0], split_stages=True) == ["cuda:0", "cuda:0"]


def test_deploy_file_asking_for_more_gpus_than_the_run_has():
    with pytest.raises(PlacementError, match="has 1"):
        stage_devices(["0", "1"], [0])
    with pytest.raises(PlacementError, match="not a device index"):
        stage_devices(["cuda:1"], [0])
    with pytest.raises(PlacementError, match="not among"):
        stage_devices(["0"], [0], home=3)


class _FakeCuda:
    def __init__(self, count: int):
        self.count = count
        self.calls: list[tuple] = []

    def device_count(self):
        return self.count

    def set_device(self, index):
        self.calls.append(("set_device", index))

    def set_per_process_memory_fraction(self, fraction, index):
        self.calls.append(("fraction", round(fraction, 4), index))


class _FakeTorch:
    def __init__(self, count: int):
        self.cuda = _FakeCuda(count)


class _FakeConfig:
    def __init__(self, gpus, workerinput=None, stage_devices="split"):
        self._options = {"omnitts_gpus": gpus, "omnitts_stage_devices": stage_devices}
        self.stash = pytest.Stash()
        if workerinput is not None:
            self.workerinput = workerinput

    def getoption(self, name):
        return self._options[name]


def _conftest():
    import importlib

    return importlib.import_module("omnitts.validators.checks.conftest")


def test_an_xdist_worker_pins_its_gpu_and_memory_share():
    conftest = _conftest()
    torch, config = _FakeTorch(2), _FakeConfig(None, {"workerid": "gw1", "workercount": 3}, stage_devices="deploy")
    conftest._pin_worker_gpu(config, torch)
    assert torch.cuda.calls == [("set_device", 1), ("fraction", 0.9, 1)]
    assert config.stash[conftest.PLACEMENT].device == "cuda:1"


def test_with_split_stages_every_worker_gets_a_share_of_every_gpu():
    # two GPUs, three workers, stages split: each worker's stage 1 runs on the other GPU, so all three may hold
    # memory on both GPUs
    conftest = _conftest()
    torch, config = _FakeTorch(2), _FakeConfig(None, {"workerid": "gw1", "workercount": 3})
    conftest._pin_worker_gpu(config, torch)
    assert torch.cuda.calls == [("set_device", 1), ("fraction", 0.3, 0), ("fraction", 0.3, 1)]
    placement = config.stash[conftest.PLACEMENT]
    assert placement.split_stages and placement.stage_devices(["0", "0"]) == ["cuda:1", "cuda:0"]


def test_workers_sharing_one_listed_gpu_split_it():
    conftest = _conftest()
    torch, config = _FakeTorch(2), _FakeConfig("1", {"workerid": "gw2", "workercount": 4})
    conftest._pin_worker_gpu(config, torch)
    assert torch.cuda.calls == [("set_device", 1), ("fraction", 0.225, 1)]


def test_a_bad_gpu_list_is_a_usage_error():
    conftest = _conftest()
    with pytest.raises(pytest.UsageError, match="GPU 2 is not visible"):
        conftest._pin_worker_gpu(_FakeConfig("2"), _FakeTorch(1))


def test_the_report_says_which_gpu_ran_what():
    from omnitts.validators.plugin import _placement_lines
    from omnitts.validators.runtime.outcomes import Outcomes

    outcomes = Outcomes(["ref_two_stage", "ref_native_ar"])
    for model, worker, device in (("ref_two_stage", "gw0", "cuda:0"), ("ref_native_ar", "gw1", "cuda:1")):
        for when in ("setup", "call", "teardown"):
            outcomes.apply(
                {
                    "kind": "report",
                    "nodeid": f"test_x.py::test_i1[{model}]",
                    "when": when,
                    "outcome": "passed",
                    "tag": {"check": "i1.stream_equals_offline", "model": model},
                    "placement": {"worker": worker, "device": device, "sharing": 1},
                }
            )
    assert _placement_lines(outcomes.per_model()) == ["ref_native_ar: cuda:1 (gw1)", "ref_two_stage: cuda:0 (gw0)"]


def test_split_placement_needs_two_gpus():
    one = place_worker("gw0", 2, [0], split_stages=True)
    assert not one.split_stages and one.memory_fractions == {0: 0.45}
    assert one.stage_devices(["0", "0"]) == ["cuda:0", "cuda:0"]
    two = place_worker("gw0", 2, [0, 1], split_stages=True)
    assert two.memory_fractions == {0: 0.45, 1: 0.45}
    assert two.stage_devices(["0", "0"]) == ["cuda:0", "cuda:1"]
    assert place_worker("gw1", 2, [0, 1], split_stages=True).stage_devices(["0", "0"]) == ["cuda:1", "cuda:0"]


def test_a_deploy_config_that_spreads_the_stages_is_followed_even_when_splitting():
    # *_2gpu.yaml: stage 0 on "1", stage 1 on "0": every worker follows it (split only spreads stages kept together)
    assert stage_devices(["1", "0"], [0, 1], home=1, split_stages=True) == ["cuda:1", "cuda:0"]
    assert stage_devices(["1", "0"], [0, 1], home=0, split_stages=True) == ["cuda:1", "cuda:0"]
    assert stage_devices(["0", "1"], [2, 3], home=3, split_stages=True) == ["cuda:2", "cuda:3"]


def test_deploy_stage_devices_reads_every_layout():
    from omnitts.knowledge.configs import deploy_stage_devices

    flat = {"stages": [{"stage_id": 0, "devices": "0"}, {"stage_id": 1, "devices": "1"}]}
    assert deploy_stage_devices(flat, 2) == ["0", "1"]
    nested = {"stages": [{"stage_id": 1, "runtime": {"devices": "1"}, "devices": "0"}, {"stage_id": 0, "devices": 0}]}
    assert deploy_stage_devices(nested, 2) == ["0", "1"]  # runtime.devices wins; ints become index strings
    legacy = {"stage_args": [{"stage_id": 0, "runtime": {"devices": "0,1"}}, {"stage_id": 1}]}
    assert deploy_stage_devices(legacy, 2) == ["0,1", None]
    assert deploy_stage_devices(None, 2) == [None, None]
    assert deploy_stage_devices({"stages": [{"stage_id": 5, "devices": "1"}]}, 1) == [None]


def test_reference_two_stage_deploy_keeps_both_stages_on_one_device():
    from omnitts.knowledge.configs import deploy_stage_devices
    from omnitts.reference_models.catalog import get_subject

    deploy = get_subject("ref_two_stage").deploy_config
    assert deploy_stage_devices(deploy, 2) == ["0", "0"]
    # so on two GPUs only --stage-devices split puts them on two devices
    assert stage_devices(deploy_stage_devices(deploy, 2), [0, 1], home=0) == ["cuda:0", "cuda:0"]
    assert stage_devices(deploy_stage_devices(deploy, 2), [0, 1], home=0, split_stages=True) == ["cuda:0", "cuda:1"]
