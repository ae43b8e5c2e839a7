{{cookiecutter.license_header}}
"""CPU contract test of {{cookiecutter.camel}} ({{cookiecutter.pattern}}): the streaming invariants of the add-tts-model guide.

The tiny model runs as generated (random weights from ``config.seed``), driven the way vLLM-Omni's runner does:
finish hook, the scheduler id written into each request's info dict, ``preprocess``, ``forward`` with
``runtime_additional_information``, {% if cookiecutter.pattern == "native-ar" %}``make_omni_output``, {% endif %}``compute_logits`` + greedy sampling{% if cookiecutter.pattern == "native-ar" %}, ``postprocess``{% endif %}.
{%- if cookiecutter.pattern == "two-stage" %}
Each talker step goes through the stage input processor's ``talker2code2wav_async_chunk`` (chunking of the deploy
yaml); the windows due in a step are decoded by code2wav in one batch.
{%- endif %}

- I1: every step emits ``model_outputs`` (1-D float32) and ``sr`` (the config's) for every request, the
  profiling run too, and a request's concatenated deltas equal one decode of its whole utterance (``ATOL``).
- I4: four concurrent requests of different lengths, arriving at different steps, get their solo audio.
- I5: per-request state is keyed by the scheduler id and empty after finish and after an abort.

When the tiny model is replaced by the real one, keep these tests and adapt ``offline_audio`` and ``STATE``.
"""

{% if cookiecutter.pattern == "two-stage" -%}
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

import vllm_omni
{%- if cookiecutter.chunk_payload_struct %}
from vllm_omni.data_entry_keys import OmniPayloadStruct, to_dict
{%- endif %}
from vllm_omni.model_executor.models.{{cookiecutter.name}} import (
    {{cookiecutter.camel}}Code2Wav,
    {{cookiecutter.camel}}Config,
    {{cookiecutter.camel}}TalkerForConditionalGeneration,
)
from vllm_omni.model_executor.models.output_templates import OmniOutput
from vllm_omni.model_executor.stage_input_processors import {{cookiecutter.name}} as processor
{%- elif cookiecutter.pattern == "single-stage" -%}
import pytest
import torch

from vllm_omni.model_executor.models.{{cookiecutter.name}} import (
    {{cookiecutter.camel}}Config,
    {{cookiecutter.camel}}ForGeneration,
)
from vllm_omni.model_executor.models.output_templates import OmniOutput
{%- else -%}
import pytest
import torch

from vllm_omni.model_executor.models.{{cookiecutter.name}} import (
    {{cookiecutter.camel}}Config,
    {{cookiecutter.camel}}ForConditionalGeneration,
)
from vllm_omni.model_executor.models.output_templates import OmniOutput
{%- endif %}

pytestmark = [pytest.mark.core_model, pytest.mark.cpu]

ATOL = 1e-5  # streamed deltas vs one decode of the whole utterance: float32 on the CPU (observed <= 2e-6)
TEXTS = ["Hi.", "Hello there, world.", "Streaming, chunk by chunk.", "Four at once."]
ARRIVALS = [0, 0, 2, 5]  # engine step at which each request arrives (max_num_seqs 4: all fit)
MAX_STEPS = 256  # the tiny model stops every request by max_frames (96 frames)
STATE = "{% if cookiecutter.pattern == 'single-stage' %}_stream_gens{% else %}_states{% endif %}"  # the per-request state dict of the AR stage


@pytest.fixture(autouse=True)
def one_thread():
    """The tiny model's ops are too small to share out: more threads only contend (CI runners share cores)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def build() -> tuple:
    """Fresh stage models, in stage order (the AR stage first, the audio stage last)."""
    config = {{cookiecutter.camel}}Config()
{%- if cookiecutter.pattern == "two-stage" %}
    return (
        {{cookiecutter.camel}}TalkerForConditionalGeneration(config=config).eval(),
        {{cookiecutter.camel}}Code2Wav(config=config).eval(),
    )
{%- elif cookiecutter.pattern == "single-stage" %}
    return ({{cookiecutter.camel}}ForGeneration(config=config).eval(),)
{%- else %}
    return ({{cookiecutter.camel}}ForConditionalGeneration(config=config).eval(),)
{%- endif %}


class Request:
    """One request as the runner sees it: scheduler id, prompt and the info dict passed at every step."""

    def __init__(self, index: int, text: str, config, arrival: int = 0, abort_step: int | None = None) -> None:
        self.id = f"req-{index}-sched"  # the scheduler id: preprocess() gets it, on_requests_finished() frees it
        self.external_id = f"req-{index}"  # the orchestrator's id (global_request_id): not what the finish hook gets
        self.text = text
        self.prompt = config.encode_text(text)
        self.info = {"text": [text], "global_request_id": [self.external_id]}
        self.arrival, self.abort_step = arrival, abort_step
        self.computed, self.last_token = 0, None
        self.done = self.aborted = False
        self.deltas: list[torch.Tensor] = []  # what a streaming client receives, copied on arrival
        self.frames: list[torch.Tensor] = []  # what the audio is made of ({% if cookiecutter.pattern == "native-ar" %}latent patches{% else %}codec frames{% endif %})


def check_audio_step(multimodal_outputs: dict | None, rows: int, sample_rate: int) -> list[torch.Tensor]:
    """I1: one step of the audio stage emits ``model_outputs`` and ``sr`` for every request."""
    assert multimodal_outputs is not None and "model_outputs" in multimodal_outputs, (
        f"I1: a step returned no model_outputs (keys: {sorted(multimodal_outputs or [])}); every return path must emit them"
    )
    deltas, rates = multimodal_outputs["model_outputs"], multimodal_outputs.get("sr")
    assert len(deltas) == rows, f"I1: model_outputs has {len(deltas)} entries for {rows} requests"
    assert rates is not None and len(rates) == rows, f"I1: sr must hold one entry per request, got {rates!r}"
    for delta, rate in zip(deltas, rates):
        assert isinstance(delta, torch.Tensor) and delta.dim() == 1 and delta.dtype == torch.float32, (
            f"audio deltas must be 1-D float32, got {getattr(delta, 'dtype', type(delta))} of shape {tuple(getattr(delta, 'shape', ()))}"
        )
        assert int(rate) == sample_rate, f"sr {int(rate)} differs from config.sample_rate {sample_rate}"
    return deltas


def ar_step(model, batch: list[Request], finished: set[str]) -> tuple[list[int], dict | None]:
    """One step of the AR runner over ``batch``; returns the sampled tokens and the multimodal outputs."""
    if finished:
        model.on_requests_finished(finished)
    if not batch:
        return [], None
    ids, positions, spans, embeds = [], [], [], []
    for req in batch:
        new = req.prompt if req.computed == 0 else [req.last_token]
        spans.append((len(ids), len(ids) + len(new)))
        positions += range(req.computed, req.computed + len(new))
        ids += new
    input_ids = torch.tensor(ids, dtype=torch.long)
    for req, (start, end) in zip(batch, spans):
        req.info["{{cookiecutter.request_id_keys.split(',')[0]}}"] = req.id
        _, req_embeds, update = model.preprocess(input_ids=input_ids[start:end], input_embeds=None, **req.info)
        req.info.update(update or {})
        embeds.append(req_embeds[: end - start])
    infos = [req.info for req in batch]
    kwargs = dict(intermediate_tensors=None, runtime_additional_information=infos, model_intermediate_buffer=infos)
    output = model.forward(input_ids, torch.tensor(positions), inputs_embeds=torch.cat(embeds), **kwargs)
    if not isinstance(output, OmniOutput):
        output = model.make_omni_output(output, **kwargs)
    hidden = output.text_hidden_states
    tokens = model.compute_logits(hidden[[end - 1 for _, end in spans]]).argmax(dim=-1).tolist()
    if model.has_postprocess:
        for req, (start, end) in zip(batch, spans):
            update = model.postprocess(hidden[start:end], multimodal_outputs=output.multimodal_outputs, **req.info)
            req.info.update(update or {})
    for req, (start, end), token in zip(batch, spans, tokens):
        req.computed, req.last_token = req.computed + end - start, token
    return tokens, output.multimodal_outputs
{%- if cookiecutter.pattern == "two-stage" %}


def decode(code2wav, items: list[tuple[list[int], dict]]) -> list[torch.Tensor]:
    """One step of the generation runner on code2wav: flat codes of several requests plus ``seq_token_counts``."""
    flat = torch.tensor([code for codes, _ in items for code in codes], dtype=torch.long)
    infos = [info for _, info in items]
    output = code2wav.forward(
        input_ids=flat,
        positions=torch.arange(flat.numel()),
        seq_token_counts=[len(codes) for codes, _ in items],
        runtime_additional_information=infos,
        model_intermediate_buffer=infos,
    )
    return check_audio_step(output.multimodal_outputs, len(items), code2wav.config.sample_rate)


def received(window) -> tuple[list[int], dict]:
    """One window as stage 1 receives it: the release's chunk transfer adapter sends the processor's payload
    over the connector as a dict{% if cookiecutter.chunk_payload_struct %} (an ``OmniPayloadStruct`` as ``to_dict(...)``){% endif %}; its flat
    ``codes.audio`` become the prompt token ids and its ``meta`` (less ``finished``) the request's info."""
{%- if cookiecutter.chunk_payload_struct %}
    assert isinstance(window, OmniPayloadStruct), f"the processor must return an OmniPayloadStruct, got {type(window)}"
    window = to_dict(window)
{%- endif %}
    codes = window["codes"]["audio"]
    codes = codes.tolist() if isinstance(codes, torch.Tensor) else list(codes)
    meta = {key: value for key, value in (window.get("meta") or {}).items() if key != "finished"}
    return codes, {"meta": meta}


def deployed_chunking() -> dict:
    """The connector's ``extra`` of the deploy yaml: the chunk and left-context sizes serving streams with."""
    deploy = yaml.safe_load((Path(vllm_omni.__file__).parent / "deploy" / "{{cookiecutter.model_type}}.yaml").read_text())
    extras = [connector.get("extra") or {} for connector in (deploy.get("connectors") or {}).values()]
    return next((extra for extra in extras if "codec_chunk_frames" in extra), {})
{%- endif %}


@torch.no_grad()
def serve(models: tuple, texts: list[str], arrivals: list[int] | None = None, aborts: dict | None = None) -> list:
    """Schedule ``texts`` like the engine (arrivals, aborts at a step, EOS finishes); stream every step's deltas."""
    model, arrivals, aborts = models[0], arrivals or [0] * len(texts), aborts or {}
    reqs = [Request(i, text, model.config, arrivals[i], aborts.get(i)) for i, text in enumerate(texts)]
{%- if cookiecutter.pattern == "two-stage" %}
    connector = SimpleNamespace(config={"extra": deployed_chunking()})
    transfer = SimpleNamespace(code_prompt_token_ids=defaultdict(list), connector=connector)
{%- endif %}
    waiting, running, finished = list(reqs), [], set()
    for step in range(MAX_STEPS):
        for req in [req for req in running if req.abort_step == step]:
            req.aborted = True
            running.remove(req)
            finished.add(req.id)
        running += [req for req in waiting if req.arrival <= step]
        waiting = [req for req in waiting if req.arrival > step]
        if not running and not waiting:
            break
        batch = list(running)
        tokens, outputs = ar_step(model, batch, finished)
        finished = set()
        if not batch:  # nothing scheduled until the next arrival
            continue
        for req, token in zip(batch, tokens):
            req.done = token == model.config.eos_token_id
            if req.done:
                running.remove(req)
                finished.add(req.id)
{%- if cookiecutter.pattern == "two-stage" %}
        assert len(outputs["codes"]["audio"]) == len(batch), "the talker must emit one frame per request"
        windows = []
        for i, req in enumerate(batch):
            req.frames.append(outputs["codes"]["audio"][i])  # kept by reference, as the engine accumulates outputs
            request = SimpleNamespace(external_req_id=req.external_id, is_finished=lambda req=req: req.done)
            payload = {"codes": {"audio": outputs["codes"]["audio"][i]}}
            window = processor.talker2code2wav_async_chunk(transfer, payload, request, is_finished=req.done)
            if window is not None:
                windows.append((req, window))
        if windows:  # stage 1 with max_num_seqs > 1 batches the windows of one step like this
            deltas = decode(models[1], [received(window) for _, window in windows])
            for (req, _), delta in zip(windows, deltas):
                req.deltas.append(delta.clone())
{%- else %}
        deltas = check_audio_step(outputs, len(batch), model.config.sample_rate)
        frames = outputs["{% if cookiecutter.pattern == 'native-ar' %}latent{% else %}codes{% endif %}"]{% if cookiecutter.pattern == "single-stage" %}["audio"]{% endif %}
        for req, delta, frame in zip(batch, deltas, frames):
            req.deltas.append(delta.clone())
            req.frames.append(frame)  # kept by reference, as the engine accumulates stage outputs
{%- endif %}
        stray = set(getattr(model, STATE)) - {req.id for req in reqs}
        assert not stray, f"I5: per-request state keyed by {sorted(stray)}, not by the scheduler request ids"
    ar_step(model, [], finished)  # the runner's next step runs the finish hook
    unfinished = [req.text for req in reqs if not (req.done or req.aborted)]
    assert not unfinished, f"{unfinished} never sampled EOS in {MAX_STEPS} steps (compute_logits decides per request)"
    return reqs


@torch.no_grad()
def offline_audio(models: tuple, req: Request) -> torch.Tensor:
    """The utterance decoded at once, the way an offline (non-streaming) run produces it."""
{%- if cookiecutter.pattern == "two-stage" %}
    consolidated = {"codes": {"audio": torch.cat(req.frames)}}  # the talker's output once the request finished
    stage0 = SimpleNamespace(finished=True, outputs=[SimpleNamespace(multimodal_output=consolidated)])
    (prompt,) = processor.talker2code2wav([stage0])
    return decode(models[1], [(prompt["prompt_token_ids"], prompt["additional_information"])])[0]
{%- elif cookiecutter.pattern == "single-stage" %}
    codes = torch.cat(req.frames)  # [frames, K]
    return models[0].codec(codes.T[None])[0].float()
{%- else %}
    latents = torch.cat(req.frames)  # [frames, latent_dim]
    return models[0].audio_vae(latents[None].float())[0].float()
{%- endif %}


def stream(req: Request) -> torch.Tensor:
    return torch.cat(req.deltas) if req.deltas else torch.zeros(0)


def assert_same_audio(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.shape == want.shape, f"{what}: {got.numel()} samples vs {want.numel()}"
    torch.testing.assert_close(got, want, rtol=0, atol=ATOL, msg=lambda m: f"{what}: {m}")


def open_state(models: tuple) -> list[str]:
    return sorted(getattr(models[0], STATE))


def test_i1_every_step_emits_deltas_that_add_up_to_the_offline_audio():
    models = build()
    for req in serve(models, TEXTS, ARRIVALS):
        streamed, offline = stream(req), offline_audio(models, req)
        # longer than offline: cumulative audio re-sent as deltas; shorter: frames lost between steps
        assert_same_audio(streamed, offline, f"I1: {req.text!r} streamed vs offline decode")
        assert streamed.numel() > 0, f"{req.text!r}: no audio at all"


def test_i1_profiling_run_emits_model_outputs():
    audio_stage = build()[-1]
    infos = [{"_is_dummy": True}, {"_is_dummy": True}]
    kwargs = dict(runtime_additional_information=infos, model_intermediate_buffer=infos)
    with torch.no_grad():
        output = audio_stage.forward(input_ids=torch.zeros(8, dtype=torch.long), positions=torch.arange(8), **kwargs)
        if not isinstance(output, OmniOutput):
            output = audio_stage.make_omni_output(output, **kwargs)
    check_audio_step(output.multimodal_outputs, len(infos), audio_stage.config.sample_rate)


def test_i4_concurrent_requests_get_their_solo_audio():
    together = serve(build(), TEXTS, ARRIVALS)
    for req in together:
        solo = stream(serve(build(), [req.text])[0])
        assert_same_audio(stream(req), solo, f"I4: {req.text!r} together vs alone")


def test_i5_request_state_is_freed_after_finish_and_abort():
    models = build()
    serve(models, TEXTS[:2])
    assert not open_state(models), f"I5: state left after every request finished: {open_state(models)}"
    reqs = serve(models, TEXTS[:2], aborts={1: 3})  # the same model keeps serving; request 1 is aborted mid-stream
    assert reqs[1].aborted and reqs[1].frames and reqs[0].done, "request 1 must be aborted mid-stream"
    assert not open_state(models), f"I5: state left after an abort: {open_state(models)}"
