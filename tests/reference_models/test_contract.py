"""The forward contract of the correct reference models, one invariant at a time."""

from __future__ import annotations

import pytest
import torch

from omnitts.reference_models.catalog import get_subject
from omnitts.validators.runtime.harness import Harness, ModelError
from omnitts.validators.runtime.syncspy import SyncSpy

MODELS = ["ref_two_stage", "ref_single_stage", "ref_native_ar"]


def leftover_state(stages, records) -> dict[str, list[str]]:
    """Per-request entries still held by any module attribute (dicts keyed by a request id)."""
    ids = {i for r in records for i in r.stage_ids.values()} | {r.ext_id for r in records}
    found: dict[str, list[str]] = {}
    for stage in stages:
        for module_name, module in stage.named_modules():
            for attr, value in vars(module).items():
                if isinstance(value, dict) and ids & {str(k) for k in value}:
                    found[f"{type(stage).__name__}.{module_name}.{attr}".replace("..", ".")] = sorted(map(str, value))
    return found


@pytest.mark.parametrize("model", MODELS)
def test_no_host_sync_in_model_calls(model, device, texts):
    """I3: the two-stage and native-AR models never read device values back; the generator reads its chunk's stop
    flags once per request and step (after its frame loop)."""
    subject = get_subject(model)
    spy = SyncSpy(subject.source_files, device=device)
    records = subject.run([texts[2], texts[0]], device, arrival_steps=[0, 1], spy=spy)
    request_steps = sum(len(r.tokens) for r in records)
    budget = subject.host_syncs_per_request_step * request_steps
    assert spy.report.total <= budget, spy.report.summary()


@pytest.mark.parametrize("model", MODELS)
def test_state_freed_on_finish_and_abort(model, device, texts, arrivals):
    """I5: after requests finish (or are aborted mid-stream), the model holds no per-request state."""
    subject = get_subject(model)
    stages = subject.build(device)
    records = subject.run(texts, device, arrival_steps=arrivals, abort_steps={1: 4}, stages=stages)
    assert records[1].aborted and records[0].finished and records[2].finished
    assert leftover_state(stages, records) == {}


@pytest.mark.parametrize("model", MODELS)
def test_concurrent_equals_solo(model, device, texts, served, atol):
    """I4: each request sounds the same alone and in a staggered batch of three."""
    subject = get_subject(model)
    stages = subject.build(device)
    for text, record in zip(texts, served(model), strict=True):
        solo = subject.run([text], device, stages=stages)[0]
        assert solo.stream_audio.shape == record.stream_audio.shape
        torch.testing.assert_close(solo.stream_audio, record.stream_audio, atol=atol, rtol=0)


@pytest.mark.parametrize("model", MODELS)
def test_every_step_emits_model_outputs(model, served):
    """I1: every step of the final stage carries ``model_outputs`` and ``sr`` for every request."""
    for record in served(model):
        assert record.steps_without_model_outputs == 0
        assert record.deltas, "no audio chunk at all"


@pytest.mark.parametrize("model", MODELS)
def test_dummy_run_emits_model_outputs(model, device):
    """Profiling / dummy runs (empty or all-``_is_dummy`` request lists) still return the audio keys."""
    subject = get_subject(model)
    stages = subject.build(device)
    final = stages[-1]
    ids = torch.zeros(4, dtype=torch.long, device=device)
    positions = torch.arange(4, device=device)
    for infos in ([], [{"_is_dummy": True}, {"_is_dummy": True}]):
        out = final(input_ids=ids, positions=positions, runtime_additional_information=infos)
        if not hasattr(out, "multimodal_outputs"):
            out = final.make_omni_output(out, runtime_additional_information=infos)
        assert "model_outputs" in out.multimodal_outputs and "sr" in out.multimodal_outputs
        assert len(out.multimodal_outputs["model_outputs"]) == max(1, len(infos))
    logits = stages[0].compute_logits(torch.zeros(2, stages[0].config.hidden_size, device=device))
    assert logits.argmax(-1).tolist() == [stages[0].config.eos_token_id] * 2


@pytest.mark.parametrize("model", MODELS)
def test_missing_request_id_is_an_error(model, device):
    """I5: no constant fallback: an info dict without the runner's id key is rejected, not shared."""
    stage = get_subject(model).build(device)[0]
    with pytest.raises(KeyError, match="request id"):
        stage.preprocess(torch.tensor([5, 6, 2], device=device), None, text=["x"], global_request_id=["ext-0"])


@pytest.mark.parametrize("model", MODELS)
def test_mrv2_request_key_is_not_read(model, device, texts):
    """Renders for 0.20-era runners key state by ``request_id``; an MRv2 runner (``req_id``) is refused loudly."""
    with pytest.raises(ModelError, match="request id") as caught:
        get_subject(model).run(texts[:1], device, release="0.30.0", model_runner="v2")
    assert isinstance(caught.value.original, KeyError)


def test_talker_frames_are_not_aliased(device, texts):
    """I5: the talker's emitted frames stay what they were when later steps run (no views of static buffers)."""
    subject = get_subject("ref_two_stage")
    engine = Harness(subject.runtime(device), device=device, check_aliasing=True)
    run = engine.run(subject.plans(texts[:1]))
    assert len(run.steps) > 4 and run.alias_violations == []


def test_processor_windows_cover_every_frame_once():
    """The async-chunk processor emits each frame once as new audio, with left context from earlier frames."""
    from types import SimpleNamespace

    processor = get_subject("ref_two_stage").processor
    manager = SimpleNamespace(
        code_prompt_token_ids={"r": []},
        connector=SimpleNamespace(config={"extra": {"codec_chunk_frames": 3, "codec_left_context_frames": 2}}),
    )
    finished = {"done": False}
    request = SimpleNamespace(external_req_id="r", is_finished=lambda: finished["done"])
    windows = []
    for step in range(8):
        frame = torch.full((1, 2), step) if step < 7 else torch.full((1, 2), -1)
        finished["done"] = step == 7
        out = processor.talker2code2wav_async_chunk(manager, {"codes": {"audio": frame}}, request)
        if out is not None:
            windows.append(out)
    new_frames = []
    for window in windows:
        flat, left = window["codes"]["audio"], window["meta"]["left_context_size"]
        frames = list(zip(flat[: len(flat) // 2], flat[len(flat) // 2 :], strict=True))
        new_frames += [f[0] for f in frames[left:]]
    assert new_frames == list(range(7))
    assert bool(windows[-1]["meta"]["finished"]) and not manager.emitted_frames
