"""Mutants: each differs from its correct model only in its declared variation, and each shows its symptom."""

from __future__ import annotations

import difflib
import importlib
import sys

import pytest
import torch

from omnitts.reference_models.catalog import apply_patches, base_files, get_subject, list_models
from omnitts.reference_models.mutants import MUTANTS
from omnitts.validators.runtime.harness import Harness
from omnitts.validators.runtime.syncspy import SyncSpy

# ------------------------------------------------------------------------------------------ declared, not copy-pasted


def test_catalog_lists_correct_models_then_mutants():
    names = list_models()
    assert names[:3] == ["ref_two_stage", "ref_single_stage", "ref_native_ar"]
    assert names[3:] == list(MUTANTS)
    for name in names[3:]:
        model, bug = name.split("@")
        assert model in names[:3] and bug and bug == bug.lower()


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_is_declared_with_its_real_bug(name):
    mutant = MUTANTS[name]
    assert mutant.description and mutant.reproduces and mutant.checks
    subject = get_subject(name)
    assert subject.is_mutant and subject.bug == mutant.bug and subject.model == mutant.model
    assert tuple(subject.expected_checks) == mutant.checks


def _changed_lines(base: str, mutated: str) -> set[int]:
    changed = set()
    matcher = difflib.SequenceMatcher(a=base.splitlines(), b=mutated.splitlines(), autojunk=False)
    for tag, _a0, _a1, b0, b1 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            changed |= set(range(b0, b1))
        elif tag == "delete":
            changed.add(b0)
    return changed


def _snippet_lines(text: str, snippet: str) -> set[int]:
    start = text.index(snippet)
    first = text.count("\n", 0, start)
    return set(range(first, first + max(1, snippet.count("\n") + (0 if snippet.endswith("\n") else 1))))


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_differs_from_its_model_only_where_declared(name):
    mutant = MUTANTS[name]
    subject = get_subject(name)
    base = base_files(mutant.model)
    mutated = {
        p.relative_to(subject.root).as_posix(): p.read_bytes()
        for p in subject.root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert set(mutated) == set(base)
    assert mutated == apply_patches(base, mutant.patches)
    patched = {p.file for p in mutant.patches}
    for rel in base:
        if rel not in patched:
            assert mutated[rel] == base[rel], f"{rel} changed but no patch declares it"
            continue
        text = mutated[rel].decode()
        allowed: set[int] = set()
        undone = text
        for patch in (p for p in mutant.patches if p.file == rel):
            assert text.count(patch.new) == 1
            allowed |= _snippet_lines(text, patch.new)
            undone = undone.replace(patch.new, patch.old)
        assert undone == base[rel].decode(), f"undoing the declared patches of {rel} does not give the base"
        stray = _changed_lines(base[rel].decode(), text) - allowed
        assert not stray, f"{rel}: lines {sorted(stray)} changed outside the declared snippets"
    if not mutant.patches:
        assert mutant.consolidation != "v0.20", "a mutant without patches must vary the harness"


# --------------------------------------------------------------------------------------------------------- symptoms


def _served_pair(served, name: str, **overrides):
    """(mutant records, correct model records) for the same scenario."""
    return served(name, **overrides), served(name.split("@")[0], **overrides)


def test_truncation_streams_less_audio_than_offline(served):
    for bad, good in zip(*_served_pair(served, "ref_two_stage@truncation"), strict=True):
        assert bad.stream_audio.numel() < good.stream_audio.numel()
    offline = served("ref_two_stage@truncation", async_chunk=False)
    assert all(
        o.stream_audio.numel() == g.stream_audio.numel() for o, g in zip(offline, served("ref_two_stage"), strict=True)
    )


def test_two_stage_replay_streams_more_audio_than_offline(served):
    offline = served("ref_two_stage@replay", async_chunk=False)
    for streamed, whole in zip(served("ref_two_stage@replay"), offline, strict=True):
        assert streamed.stream_audio.numel() > whole.stream_audio.numel()


def test_early_return_step_has_no_model_outputs(device):
    """The decoder step that only carries a finished sentinel (no frames left) loses ``model_outputs``."""
    for name, expect in (("ref_two_stage", True), ("ref_two_stage@early-return", False)):
        code2wav = get_subject(name).build(device)[1]
        sentinel = {"codes": {"audio": []}, "meta": {"left_context_size": 0, "finished": torch.tensor(True)}}
        out = code2wav(
            input_ids=torch.zeros(0, dtype=torch.long, device=device),
            positions=None,
            runtime_additional_information=[sentinel],
            seq_token_counts=[0],
        )
        assert ("model_outputs" in out.multimodal_outputs) is expect


@pytest.mark.parametrize(
    "name",
    [
        "ref_two_stage@host-sync-cpu",
        "ref_two_stage@host-sync-tolist",
        "ref_single_stage@tensor-branch",
        "ref_native_ar@host-sync-item",
    ],
)
def test_host_sync_mutants_sync_in_the_hot_loop(name, device, texts):
    """More host reads than the correct model's budget (0, or 1 per request and step for the generator)."""
    subject = get_subject(name)
    spy = SyncSpy(subject.source_files, device=device)
    records = subject.run([texts[2], texts[0]], device, arrival_steps=[0, 1], spy=spy)
    request_steps = sum(len(r.tokens) for r in records)
    assert spy.report.total > subject.host_syncs_per_request_step * request_steps, spy.report.summary()


def test_buffer_view_frames_are_overwritten_by_the_next_step(device, texts):
    subject = get_subject("ref_two_stage@buffer-view")
    run = Harness(subject.runtime(device), device=device, check_aliasing=True).run(subject.plans(texts[:1]))
    assert any("codes.audio" in v and "changed in place" in v for v in run.alias_violations), run.alias_violations


def test_buffer_view_is_seen_by_the_aliasing_check_not_by_the_audio(device, texts, references):
    """Without async chunk, stage 0's frames are consolidated after the request finished. The runner's per-request
    payload split copies list items (``to_payload_element``), so the audio still equals the reference: only the
    aliasing check (I5) sees the frames change after they were returned."""
    subject = get_subject("ref_two_stage@buffer-view")
    engine = Harness(subject.runtime(device), device=device, async_chunk=False, check_aliasing=True)
    plans = subject.plans(texts)
    run = engine.run(plans)
    assert any("codes.audio" in v for v in run.alias_violations)
    for result, ref in zip(run.in_order(plans), references("ref_two_stage"), strict=True):
        torch.testing.assert_close(result.stream_audio, ref.waveform, atol=1e-4, rtol=0)


def test_wrong_device_decodes_away_from_the_decoder(device):
    subject = get_subject("ref_two_stage@wrong-device")
    if not device.startswith("cuda"):
        source = (subject.root / "models/ref_two_stage/ref_two_stage_code2wav.py").read_text()
        assert 'device="cpu"' in source  # one device on this machine: only the static rule (OMNI-INT-006) sees it
        pytest.skip("codec-on-the-wrong-device needs a second device to show at runtime")
    code2wav = subject.build(device)[1]
    codes = torch.zeros(code2wav.config.num_code_groups * 4, dtype=torch.long, device=device)
    with pytest.raises(RuntimeError):
        code2wav(input_ids=codes, positions=None, runtime_additional_information=[{"meta": {"left_context_size": 0}}])


def test_wrong_hop_streams_more_audio_than_offline(served):
    offline = served("ref_two_stage@wrong-hop", async_chunk=False)
    for streamed, whole in zip(served("ref_two_stage@wrong-hop"), offline, strict=True):
        assert streamed.stream_audio.numel() > whole.stream_audio.numel()


def test_break_first_silences_all_but_the_first_window(device, texts):
    """Whenever the decoder batches more than one window per step, the others come back empty."""
    runs = [
        get_subject(name).run(texts, device, decoder_max_num_seqs=4)
        for name in ("ref_two_stage@break-first", "ref_two_stage")
    ]
    bad, good = runs
    assert bad[0].stream_audio.numel() == good[0].stream_audio.numel()
    assert any(b.stream_audio.numel() < g.stream_audio.numel() for b, g in zip(bad[1:], good[1:], strict=True))


def test_max_num_seqs_1_serialises_concurrent_requests(device, texts):
    subject = get_subject("ref_two_stage@max-num-seqs-1")
    assert subject.runtime(device).max_num_seqs == (1, 1) and subject.stage_deploy(1)["max_num_seqs"] == 1
    records = subject.run(texts, device)  # all three arrive together
    good = get_subject("ref_two_stage").run(texts, device)
    assert records[1].first_audio_step > records[0].finish_step
    assert good[1].first_audio_step < good[0].finish_step


def test_replay_streams_more_audio_than_offline(served, references):
    for record, ref in zip(served("ref_single_stage@replay"), references("ref_single_stage"), strict=True):
        assert record.stream_audio.numel() > ref.waveform.numel()


@pytest.mark.parametrize(
    "name", ["ref_single_stage@const-request-key", "ref_single_stage@batch-first", "ref_native_ar@last-wins"]
)
def test_batch_mutants_differ_under_concurrency_only(name, device, texts, served):
    subject = get_subject(name)
    solo = [subject.run([text], device)[0] for text in texts]
    good = served(subject.model)
    for alone, reference in zip(solo, good, strict=True):  # alone, each request is fine ...
        torch.testing.assert_close(alone.stream_audio, reference.stream_audio, atol=1e-4, rtol=0)
    together = served(name)  # ... together they are not
    assert any(
        a.stream_audio.shape != b.stream_audio.shape or not torch.allclose(a.stream_audio, b.stream_audio, atol=1e-4)
        for a, b in zip(together, good, strict=True)
    )


def test_batch_flag_keeps_finished_requests_alive(served):
    bad, good = _served_pair(served, "ref_single_stage@batch-flag", max_tokens=16)
    assert bad[2].finish_step > good[2].finish_step  # the short request waits for the batch
    assert bad[2].stream_audio.numel() > good[2].stream_audio.numel()  # and its recreated generator replays audio


def test_abort_leak_keeps_the_aborted_generator(device, texts):
    for name, leaked in (("ref_single_stage", False), ("ref_single_stage@abort-leak", True)):
        subject = get_subject(name)
        (model,) = subject.build(device)
        records = subject.run(texts, device, abort_steps={0: 2}, stages=(model,))
        assert records[0].aborted
        assert (records[0].stage_ids[0] in model._stream_gens) is leaked


def test_state_leak_keeps_every_request(device, texts, arrivals):
    for name, leaked in (("ref_native_ar", 0), ("ref_native_ar@state-leak", len(texts))):
        subject = get_subject(name)
        (model,) = subject.build(device)
        subject.run(texts, device, arrival_steps=arrivals, stages=(model,))
        assert len(model._states) == leaked


def test_optional_import_breaks_import_without_the_package(monkeypatch):
    """Without ``soundfile`` installed, the mutant's model package no longer imports; the correct one does."""
    monkeypatch.setitem(sys.modules, "soundfile", None)  # "not installed"
    for name, breaks in (("ref_single_stage", False), ("ref_single_stage@optional-import", True)):
        package = get_subject(name).package
        for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            monkeypatch.delitem(sys.modules, module)  # import afresh; restored after the test
        if breaks:
            with pytest.raises(ImportError):
                importlib.import_module(f"{package}.modeling_ref_single_stage")
        else:
            importlib.import_module(f"{package}.modeling_ref_single_stage")


def test_consolidation_skipping_audio_leaves_offline_consumers_a_chunk_list(served):
    for record in served("ref_single_stage@consolidation-skips-audio"):
        offline = record.offline["audio"]
        assert isinstance(offline, list) and len(offline) == len(record.deltas)
        last = offline[-1]  # what code reading the final value as the waveform gets
        assert last.numel() < record.stream_audio.numel()


# ------------------------------------------------------------------------------------------ the diagnostics mutants


def test_chunk_replay_and_stream_doubled_repeat_audio(device, texts):
    good = get_subject("ref_single_stage").run(texts[:1], device)[0]
    chunk = good.deltas[0].numel()
    replayed = get_subject("ref_single_stage@chunk-replay").run(texts[:1], device)[0]
    assert replayed.stream_audio.numel() == good.stream_audio.numel() + chunk  # one chunk played twice
    doubled = get_subject("ref_single_stage@stream-doubled").run(texts[:1], device)[0]
    whole = good.stream_audio
    torch.testing.assert_close(doubled.stream_audio, torch.cat([whole, whole]), atol=1e-4, rtol=0)


def test_seam_fade_silences_every_seam(device, texts):
    faded = get_subject("ref_single_stage@seam-fade").run(texts[:1], device)[0]
    assert all(float(d[0].abs()) == 0.0 for d in faded.deltas if d.numel())  # each piece starts from silence


def test_voice_broadcast_speaks_the_first_requests_text(device, texts):
    subject = get_subject("ref_single_stage@voice-broadcast")
    alone = [subject.run([text], device)[0] for text in texts]
    together = subject.run(texts, device)  # all three arrive in one step
    torch.testing.assert_close(together[1].stream_audio, alone[0].stream_audio, atol=1e-5, rtol=0)
    torch.testing.assert_close(together[0].stream_audio, alone[0].stream_audio, atol=1e-5, rtol=0)


def test_seed_batch_draws_after_its_peers(device, texts):
    """Seeded through the runner's ``_omni_seed`` (0.28+): alone reproducible, batched not."""
    from dataclasses import replace

    subject = get_subject("ref_single_stage@seed-batch")
    runtime = subject.runtime(device)
    assert runtime.release == "0.30.0"
    plans = [replace(p, seed=7 + i) for i, p in enumerate(subject.plans(texts))]
    alone = [Harness(runtime, device=device).run([p]).requests[p.ext_id].stream_audio for p in plans]
    again = Harness(runtime, device=device).run([plans[1]]).requests[plans[1].ext_id].stream_audio
    torch.testing.assert_close(again, alone[1], atol=0, rtol=0)
    together = Harness(runtime, device=device).run(plans).in_order(plans)
    assert not torch.equal(together[1].stream_audio[: alone[1].numel()], alone[1])
    unseeded = [replace(p, seed=None) for p in plans]  # without a seed the model stays greedy
    good = get_subject("ref_single_stage").run(texts, device)
    for got, want in zip(Harness(runtime, device=device).run(unseeded).in_order(unseeded), good, strict=True):
        torch.testing.assert_close(got.stream_audio, want.stream_audio, atol=1e-5, rtol=0)


def test_nan_and_silent_decoders(device, texts):
    nan = get_subject("ref_single_stage@nan-decoder").run(texts[:1], device)[0].stream_audio
    assert torch.isnan(nan).all()
    silent = get_subject("ref_single_stage@silent-decoder").run(texts[:1], device)[0].stream_audio
    assert silent.numel() > 0 and float(silent.abs().max()) == 0.0
