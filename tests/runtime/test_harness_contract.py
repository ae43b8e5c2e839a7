"""The harness passes what each release's runner really passes (ids, kwargs, finish notifications, batches)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import toys
from torch import nn

from omnitts.knowledge.runner import contract_for
from omnitts.validators.runtime.harness import ContractError, Harness, ModelError, count_frames
from omnitts.validators.runtime.subject import RequestPlan, RuntimeSubject, StageSpec


class Stepper(nn.Module):
    """Single-stage model that records every call it receives; emits 4 samples per request and step."""

    have_multimodal_outputs = True

    def __init__(self, has_preprocess=True, stop_after=3, mm=True):
        super().__init__()
        self.has_preprocess = has_preprocess
        self.stop_after = stop_after
        self.mm = mm
        self.calls: list[tuple] = []
        self.w = nn.Parameter(torch.ones(1))

    def preprocess(self, input_ids, input_embeds, **info):
        self.calls.append(("preprocess", dict(info)))
        return input_ids, torch.zeros(input_ids.shape[0], 4), {}

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None, **kwargs):
        """Delta."""
        infos = kwargs.get("runtime_additional_information")
        self.calls.append(("forward", sorted(kwargs), [dict(i) for i in (infos or [])], kwargs))
        hidden = torch.zeros(input_ids.shape[0], 4)
        hidden[:, 0] = positions.float()
        n = len(infos or [1])
        outs = [torch.full((4,), float(i)) for i in range(n)]
        out = toys.OmniOutput(hidden, {"model_outputs": outs, "sr": [torch.tensor(16000)] * n} if self.mm else None)
        return out

    def compute_logits(self, hidden):
        logits = torch.zeros(hidden.shape[0], 8)
        stop = hidden[:, 0] >= self.stop_after
        logits[:, 5] = 1.0
        logits[stop, 1] = 10.0  # EOS id 1
        return logits

    def on_requests_finished(self, ids):
        self.calls.append(("finished", set(ids)))


def _subject(model_factory, release="0.20.0", n=4, runner="v1", **kw):
    return RuntimeSubject(
        name="stepper",
        pattern="single-stage",
        release=release,
        model_runner=runner,
        stages=[StageSpec(0, "stepper", "ar", model_factory)],
        prompts=[RequestPlan(f"r{i}", [3] * (1 + i), {"text": [f"t{i}"]}, max_tokens=50) for i in range(n)],
        sample_rate=16000,
        hop_length=4,
        eos_token_id=1,
        **kw,
    )


def _run(subject, plans=None, **kw):
    eng = Harness(subject, **kw)
    run = eng.run(plans or subject.prompts, "t")
    return eng.models[0], run


@pytest.mark.parametrize(
    "release,runner,key",
    [
        ("0.16.0", "v1", None),
        ("0.18.0", "v1", None),
        ("0.20.0", "v1", "request_id"),
        ("0.22.0", "v1", "request_id"),
        ("0.30.0", "v1", "request_id"),
        ("0.30.0", "v2", "req_id"),
    ],
)
def test_preprocess_receives_the_release_id_key(release, runner, key):
    model, run = _run(_subject(Stepper, release=release, runner=runner))
    pre = [c[1] for c in model.calls if c[0] == "preprocess"]
    sched = {res.stage_ids[0] for res in run.requests.values()}
    glob = {res.ext_id for res in run.requests.values()}
    for info in pre:
        assert info["global_request_id"][0] in glob  # the orchestrator's id is always there
        if key is None:
            assert "request_id" not in info and "req_id" not in info
        else:
            assert info[key] in sched and info[key] not in glob  # scheduler id, not the external id
    prof = contract_for(release, runner)
    assert all(("_omni_prompt_len" in i) == prof.writes_omni_progress_keys for i in pre)


@pytest.mark.parametrize(
    "release,names",
    [
        ("0.16.0", ["runtime_additional_information"]),
        ("0.20.0", ["model_intermediate_buffer", "runtime_additional_information"]),
    ],
)
def test_forward_kwargs_per_release(release, names):
    model, _ = _run(_subject(Stepper, release=release))
    fwd = [c for c in model.calls if c[0] == "forward"]
    for _, keys, _, kwargs in fwd:
        for n in names:
            assert n in keys
        if len(names) == 2:
            assert kwargs[names[0]] is kwargs[names[1]]  # the same list object
        assert "logits_index" in keys and "sampling_metadata" in keys


def test_finish_ids_are_scheduler_ids_delivered_next_step_before_forward():
    model, run = _run(_subject(Stepper))
    sched = {res.stage_ids[0] for res in run.requests.values()}
    finished = [c[1] for c in model.calls if c[0] == "finished"]
    assert set().union(*finished) == sched
    # a finish notification is never the last call of the step that sampled EOS: a forward follows it or the drain
    seq = [c[0] for c in model.calls]
    first_fin = seq.index("finished")
    assert seq[first_fin - 1] in ("forward", "preprocess")


def test_no_finish_hook_before_0_20():
    model, _ = _run(_subject(Stepper, release="0.18.0"))
    assert not [c for c in model.calls if c[0] == "finished"]


def test_abort_is_notified_with_the_scheduler_id():
    sub = _subject(lambda: Stepper(stop_after=20))
    plans = [replace(p, abort_step=3 if p.ext_id == "r1" else None) for p in sub.prompts]
    model, run = _run(sub, plans)
    assert run.requests["r1"].aborted
    assert any(run.requests["r1"].stage_ids[0] in c[1] for c in model.calls if c[0] == "finished")


def test_staggered_arrival_mixes_prefill_and_decode_and_condenses_batch_order():
    sub = _subject(lambda: Stepper(stop_after=6))
    plans = [replace(p, arrive_step=2 * i) for i, p in enumerate(sub.prompts)]
    model, run = _run(sub, plans)
    fwd = [c for c in model.calls if c[0] == "forward"]
    assert any(len(c[2]) >= 3 for c in fwd)
    mixed = [s for s in run.steps if not s.steady and len(s.req_ids) > 1]
    assert mixed, "a request arriving while others stream is prefilled in their batch"
    orders = [tuple(s.req_ids) for s in run.steps]
    assert len(set(orders)) > 3


def test_max_num_seqs_limits_the_running_batch():
    sub = _subject(lambda: Stepper(stop_after=4), max_num_seqs=(2,))
    _, run = _run(sub)
    assert max(len(s.req_ids) for s in run.steps) == 2
    assert all(r.finished for r in run.requests.values())


def test_without_have_multimodal_outputs_the_audio_is_dropped():
    class NoFlag(Stepper):
        have_multimodal_outputs = False

    _, run = _run(_subject(NoFlag))
    # the runner treats the OmniOutput as a plain tuple: no multimodal outputs, and the output processor renames the
    # request's hidden-state slice to "audio" - consumers get hidden states instead of the waveform
    deltas = [d for r in run.requests.values() for d in r.deltas]
    assert deltas and all(d.dim() == 2 and d.shape[-1] == 4 for d in deltas)


def test_model_exception_carries_its_traceback():
    class Boom(Stepper):
        def forward(self, *a, **k):
            raise ValueError("kaboom")

    with pytest.raises(ModelError) as err:
        _run(_subject(Boom))
    assert "kaboom" in err.value.tb and "forward" in err.value.tb


def test_generation_stage_rejects_wrong_list_length():
    class BadDecoder(toys.ToyCode2Wav):
        def forward(self, *a, **k):
            out = super().forward(*a, **k)
            mm = dict(out.multimodal_outputs)
            mm["model_outputs"] = mm["model_outputs"] + [torch.zeros(1)]
            return toys.OmniOutput(None, mm)

    sub = toys.two_stage()
    sub.stages[1] = replace(sub.stages[1], factory=lambda: BadDecoder(toys.ToyConfig()))
    with pytest.raises(ContractError, match="one entry per request"):
        Harness(sub, gen_max_batch=0).run(sub.prompts, "t")


def test_empty_final_chunk_runs_the_decoder_on_one_pad_token():
    seen = []

    class Rec(toys.ToyCode2Wav):
        def forward(self, input_ids, positions, **k):
            seen.append(list(k["seq_token_counts"]))
            return super().forward(input_ids, positions, **k)

    sub = toys.two_stage()
    sub.stages[1] = replace(sub.stages[1], factory=lambda: Rec(toys.ToyConfig()))
    # chunk size 1: every frame goes out immediately, so the finish chunk is empty
    Harness(sub, connector_extra={"codec_chunk_frames": 1}).run(sub.prompts[:1], "t")
    assert [1] in seen


def test_toys_stream_equals_reference_bit_exact():
    for sub in (toys.two_stage(), toys.single_stage()):
        run = Harness(sub).run(sub.prompts, "t")
        for p in sub.prompts:
            ref = sub.reference(p)
            assert torch.equal(run.requests[p.ext_id].stream_audio, ref), (sub.name, p.ext_id)


def test_count_frames():
    assert count_frames({"codes.audio": torch.tensor([[1, 2], [-1, -1]])}) == 1
    assert count_frames({"codes.audio": [torch.tensor([[1, 2]]), torch.tensor([[3, 4]])]}) == 2
    assert count_frames({"latent": torch.zeros(3, 8)}) == 3
    assert count_frames({"model_outputs": torch.zeros(3)}) is None


def test_outputs_aliasing_is_detected():
    class Aliasing(Stepper):
        def __init__(self):
            super().__init__(stop_after=5)
            self.buf = torch.zeros(4)

        def forward(self, input_ids, positions, **kw):
            out = super().forward(input_ids, positions, **kw)
            self.buf.copy_(positions[:1].float().expand(4))
            return toys.OmniOutput(
                out.text_hidden_states, {"model_outputs": [self.buf] * len(kw["runtime_additional_information"])}
            )

    eng = Harness(_subject(Aliasing, n=1), check_aliasing=True)
    eng.run(eng.subject.prompts, "t")
    assert eng.alias_violations and "view of a persistent buffer" in eng.alias_violations[0]
