"""Drive the tree's own offline ``Omni`` for the engine tier (runs inside the engine environment).

``python -m omnitts.validators.engine.offline --model-dir DIR --plan PLAN.json --out OUT`` starts ``Omni`` once on
the model directory and runs the plan's scenarios: ``solo`` (each text alone, one after the other) and
``batches`` (lists of texts submitted together, so the scheduler batches them), then the model's example and the
in-worker observations (omnitts's worker extension, through the engine's ``collective_rpc``). What it saw is one
``OfflineRun`` observation (:func:`write`: ``OUT/observations.json``, audio under ``OUT/arrays``); the verdicts run in
the test process. The engine's own errors are recorded in it, so that the check, not the suite, fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import traceback
from pathlib import Path

from omnitts.validators.backends.workers import MEMORY, SYNC_ARM, SYNC_REPORT, growth_loop, poll_settled
from omnitts.validators.observations import schema
from omnitts.validators.observations.audio import RequestAudio, StreamPair
from omnitts.validators.observations.engine import OfflineRun, Scenario, WorkerRun
from omnitts.validators.observations.model import ExampleRun, WavFile
from omnitts.validators.observations.state import AbortAttempt, AbortObservation

OBSERVATIONS = "observations.json"


def _audio(output):
    """(waveform float32 numpy, sample rate) of one final OmniRequestOutput."""
    import numpy as np
    import torch

    mm = output.multimodal_output
    if mm is None:
        raise ValueError(f"request {output.request_id}: no multimodal_output")
    audio = mm.get("audio") if hasattr(mm, "get") else getattr(mm, "audio", None)
    if audio is None:
        keys = list(mm.keys()) if hasattr(mm, "keys") else type(mm).__name__
        raise ValueError(f"request {output.request_id}: no audio in multimodal_output ({keys})")
    if isinstance(audio, list):
        audio = torch.cat([torch.as_tensor(a).reshape(-1) for a in audio]) if audio else torch.zeros(0)
    wave = torch.as_tensor(audio).reshape(-1).float().cpu().numpy().astype(np.float32)
    sr = mm.get("sr") if hasattr(mm, "get") else None
    if isinstance(sr, list):
        sr = sr[-1]
    return wave, int(sr) if sr is not None else None


def _pieces(output, seen: int) -> tuple[list, int]:
    """The new audio pieces of one streamed output, as the release's serving streams them
    (``serving_speech._generate_audio_chunks``): a list grows (emit its new tail), a tensor is this step's piece."""
    import numpy as np
    import torch

    mm = output.multimodal_output
    audio = (mm.get("audio") if hasattr(mm, "get") else getattr(mm, "audio", None)) if mm is not None else None
    if audio is None:
        return [], seen
    items = audio[seen:] if isinstance(audio, list) else [audio]
    seen = len(audio) if isinstance(audio, list) else seen + 1
    return [torch.as_tensor(a).reshape(-1).float().cpu().numpy().astype(np.float32) for a in items], seen


def _delta(omni):
    from vllm.sampling_params import RequestOutputKind

    return _stage0_params(omni, every_stage=True, output_kind=RequestOutputKind.DELTA)


def _stream(omni, build, text: str, whole: RequestAudio | None) -> StreamPair:
    """One text streamed (every stage DELTA, as the server streams), against its solo whole output."""
    import numpy as np

    label, pieces, seen, sr = repr(text), [], 0, None
    for output in omni.generate([build(text)], _delta(omni), py_generator=True, use_tqdm=False):
        if getattr(output, "final_output_type", "audio") != "audio":
            continue
        new, seen = _pieces(output, seen)
        pieces += [p for p in new if p.size]
        mm = output.multimodal_output or {}
        rate = mm.get("sr") if hasattr(mm, "get") else None
        rate = rate[-1] if isinstance(rate, list) and rate else rate
        sr = int(rate) if rate is not None else sr
    samples = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
    got = RequestAudio(label, samples, sr, tuple(p.size for p in pieces), text)
    return StreamPair(label, got, whole)


def _stream_or_error(omni, build, text: str, whole: RequestAudio | None) -> StreamPair:
    try:
        return _stream(omni, build, text, whole)
    except Exception as exc:  # recorded for the stream checks only
        return StreamPair(repr(text), whole=whole, error=f"streaming failed: {type(exc).__name__}: {exc}")


def _request(text: str) -> dict:
    # Without an example of the model's own: the text is the prompt (tokenized by the engine) and also in
    # additional_information, as the scaffold's example sends it.
    return {"prompt": text, "additional_information": {"text": [text]}}


def _with_info(request: dict, info: dict) -> dict:
    """``request`` with ``info``'s keys added to its ``additional_information`` (``--omnitts-request-info``), each
    value as a one-element list unless it is a list already, the form the release's requests carry them in."""
    extra = {key: value if isinstance(value, list) else [value] for key, value in info.items()}
    return {**request, "additional_information": {**request.get("additional_information", {}), **extra}}


def _load_example(path: str | None):
    """The model's offline example as a module (its ``build_request`` builds every request of the plan)."""
    if not path:
        return None
    import importlib.util

    spec = importlib.util.spec_from_file_location("omnitts_engine_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_example(example, omni, out: Path, text: str) -> ExampleRun:
    """Run the example's own ``main()`` on the running engine (its ``Omni`` is the one already started), as a
    contributor would run the script: whatever output types it reads must be the release's real ones."""
    import argparse

    wav_dir = out / "example"
    args = argparse.Namespace(
        model=None,
        text=text,
        max_new_tokens=None,
        seed=42,
        output_dir=str(wav_dir),
        deploy_config=None,
        stage_init_timeout=300,
    )
    example.Omni = lambda *a, **k: omni
    try:
        example.main(args)
    except Exception as exc:
        return ExampleRun(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    return ExampleRun(tuple(WavFile(str(p), 0, 0) for p in sorted(wav_dir.glob("*.wav"))))


def _rpc(omni):
    """``method`` of omnitts's worker extension on every worker of every stage (the engine's ``collective_rpc``):
    one answer per worker, stage by stage."""

    def call(method: str) -> list:
        answers = []
        for stage in omni.engine.collective_rpc(method, timeout=120):
            answers.extend(stage if isinstance(stage, list) else [stage])
        return answers

    return call


def _stage0_params(omni, every_stage: bool = False, **changes):
    """The deploy's per-stage sampling params with ``changes`` on stage 0 (or on every stage that has them)."""
    import copy

    params = copy.deepcopy(omni.default_sampling_params_list)
    for stage in params if every_stage else params[:1]:
        for key, value in changes.items():
            if every_stage and not hasattr(stage, key):
                continue
            setattr(stage, key, value)
    return params


def _worker_run(omni, build, texts: list[str], plan: dict) -> WorkerRun:
    """I5 and I3 inside the workers, after the scenarios (which warmed the engine up): state after finish and after
    an abort, host syncs of steady-state steps with the spy armed, state growth over sequential requests."""
    from vllm.sampling_params import RequestOutputKind

    rpc = _rpc(omni)
    after_finish = poll_settled(rpc, 15.0)
    # Abort: stream one long request, abort it at its first output (closing Omni's generator aborts it). Every stage
    # streams: Omni makes a stage that does not ask for DELTA FINAL_ONLY, and the output it yields is the last
    # stage's, so with stage 0 alone streaming a two-stage model's first output was already its last.
    gen = omni.generate(
        [build(plan["long_text"])],
        _stage0_params(omni, every_stage=True, output_kind=RequestOutputKind.DELTA),
        py_generator=True,
        use_tqdm=False,
    )
    first = next(gen, None)
    gen.close()
    interrupted = first is not None and not first.finished
    after_abort = poll_settled(rpc, 15.0)
    # I3: armed after warm-up, 4 requests at once, up to 10 steps each (as the harness's check).
    rpc(SYNC_ARM)
    omni.generate([build(t) for t in texts[:4]], _stage0_params(omni, max_tokens=10), use_tqdm=False)
    syncs = tuple(schema.load(a) for a in rpc(SYNC_REPORT))
    # I5 growth: short sequential requests (3 tokens each); the state after the first and after the last.
    n, short = plan.get("sequential", 100), _stage0_params(omni, max_tokens=3)

    def send(i: int) -> None:
        omni.generate([build(texts[i % len(texts)])], short, use_tqdm=False)

    before, after = growth_loop(send, lambda: poll_settled(rpc, 15.0), n)
    aborts = _aborts(omni, build, plan, rpc)
    return WorkerRun(after_finish, after_abort, interrupted, syncs, n, before, after, aborts)


ABORT_REPEATS = 3


def _aborts(omni, build, plan: dict, rpc) -> AbortObservation:
    """i5.abort_recovery: the long text streamed to its end (a warm-up that also counts its audio outputs), the
    baseline, then the same request aborted (its generator closed) after a third, two thirds and its first audio
    output, three times each; state and memory once the workers were told, then a request that must be served."""
    text = plan["long_text"]

    def stream(stop: int | None) -> tuple[int, bool]:
        gen = omni.generate([build(text)], _delta(omni), py_generator=True, use_tqdm=False)
        received, finished, seen = 0, False, 0
        for output in gen:
            new, seen = _pieces(output, seen)
            received += sum(1 for p in new if p.size)
            if output.finished and getattr(output, "final_output_type", "audio") == "audio":
                finished = True
                break
            if stop is not None and received >= stop:
                break
        gen.close()
        return received, finished

    total, _ = stream(None)
    before = poll_settled(rpc, 15.0)
    memory_before = tuple(schema.load(a) for a in rpc(MEMORY))
    offsets = sorted({1, max(2, total // 3), max(3, 2 * total // 3)})
    offsets = [k for k in offsets if k < total] or [1]
    attempts = []
    for rep in range(ABORT_REPEATS):
        for k in offsets:
            t0 = time.monotonic()
            received, finished = stream(k)
            attempts.append(
                AbortAttempt(
                    f"after {k} of {total} audio outputs",
                    f"{text[:24]!r}... #{rep}",
                    received,
                    received > 0 and not finished,
                    round(time.monotonic() - t0, 3),
                )
            )
    after = poll_settled(rpc, 30.0)
    ids = dict.fromkeys(after.seen - before.seen, "scheduler id of an aborted request")
    memory_after = tuple(schema.load(a) for a in rpc(MEMORY))
    served = None
    try:
        omni.generate([build(plan["texts"][0])], None, use_tqdm=False)
    except Exception as exc:  # noqa: BLE001 - the observation
        served = f"{type(exc).__name__}: {exc}"
    return AbortObservation(tuple(attempts), before, after, memory_before, memory_after, ids, served)


def _seeded(omni, build, texts: list[str], seed: int) -> tuple[Scenario, ...]:
    """The first four texts with ``seed`` on stage 0 (which hands it to the model as ``_omni_seed``): each alone,
    then together, in reverse, and one of them twice; then the first alone with another seed. ``Omni.generate``
    takes one sampling-params list for every prompt of a call, so every request of a call has the same seed."""
    base = texts[:4]
    calls = {
        "seed_solo": [[t] for t in base],
        "seed_at_once": [base],
        "seed_reversed": [list(reversed(base))],
        "seed_twice": [[base[0], base[1], base[0], base[2]]],
    }
    found = []
    for name, batches in calls.items():
        got, t0 = [], time.monotonic()
        for batch in batches:
            got += _generate(omni, build, batch, _stage0_params(omni, seed=seed), name)
        found.append(Scenario(name, tuple(got), round(time.monotonic() - t0, 3)))
    again = _generate(omni, build, [base[0]], _stage0_params(omni, seed=seed + 1), "seed_reseeded")
    found.append(Scenario("seed_reseeded", tuple(again)))
    return tuple(found)


def _generate(omni, build, texts: list[str], params, name: str) -> list[RequestAudio]:
    """``texts`` submitted together; each one's final audio, in submission order."""
    import numpy as np

    outputs = omni.generate([build(t) for t in texts], params, use_tqdm=False)
    finals = [o for o in outputs if getattr(o, "final_output_type", "audio") == "audio" and o.finished]
    if len(finals) != len(texts):
        raise RuntimeError(f"{name}: {len(texts)} requests gave {len(finals)} final audio outputs")
    order = sorted(
        finals,
        key=lambda o: int(str(o.request_id).split("_")[0]) if str(o.request_id).split("_")[0].isdigit() else 0,
    )
    got = []
    for text, output in zip(texts, order, strict=True):
        wave, sr = _audio(output)
        got.append(RequestAudio(repr(text), np.asarray(wave, dtype=np.float32), sr, text=text))
    return got


# Keys of the plan passed on to ``Omni(...)``: per-stage devices when the session has two or more GPUs
# (runtime.StagePlacement.omni_kwargs), omnitts's worker extension for the in-worker I5/I3 checks (collective RPC),
# ``load_format`` ("dummy" with --dummy-weights) and the model directory's own ``deploy_config``
# (pytest_options.engine_kwargs).
OMNI_KEYS = ("stage_overrides", "worker_extension_cls", "load_format", "deploy_config", "init_timeout")


def omni_kwargs(plan: dict) -> dict:
    """The keyword arguments of ``Omni(model=..., ...)`` the plan asks for (beyond ``stage_init_timeout``)."""
    return {key: plan[key] for key in OMNI_KEYS if plan.get(key)}


def _serving_builder(plan: dict, model_dir: str):
    """For a model whose release sizes its prompt from ``additional_information`` (``plan["serving_model"]``): requests
    built as the release's serving adapter builds them (``serving_requests.py``); None for the others."""
    if not plan.get("serving_model"):
        return None
    from omnitts.validators.engine.serving_requests import builder

    return builder(plan.get("release"), plan["serving_model"], Path(model_dir))


def run(model_dir: str, plan: dict, out: Path) -> OfflineRun:
    from vllm_omni import Omni

    started = time.monotonic()
    extra = omni_kwargs(plan)
    omni = Omni(model=model_dir, stage_init_timeout=plan.get("stage_init_timeout", 300), **extra)
    startup = round(time.monotonic() - started, 2)
    scenarios = {"solo": [[t] for t in plan["texts"]]}
    scenarios.update({f"batch{i}": [texts] for i, texts in enumerate(plan.get("batches", []))})
    example = _load_example(plan.get("example"))
    info = plan.get("request_info")
    serving = _serving_builder(plan, model_dir)
    if example is not None and hasattr(example, "build_request"):
        build, source = example.build_request, "example"
    elif serving is not None:  # the release's serving adapter's own request shape (prompt-length placeholder)
        build, source = (lambda text: serving(text, info or {})), "release serving adapter"
    elif info:
        base = _request
        build, source = (lambda text: _with_info(base(text), info)), "omnitts+request_info"
    else:
        build, source = _request, "omnitts"
    found, example_run, worker, streams, seeded, seed_error = [], None, None, (), (), None
    try:
        if extra.get("worker_extension_cls"):
            _rpc(omni)("omnitts_install")  # before any request reaches a worker
        for name, calls in scenarios.items():
            got, t0 = [], time.monotonic()
            for texts in calls:
                # Sampling parameters: each stage's defaults from the model's deploy config (greedy there).
                got += _generate(omni, build, texts, None, name)
            found.append(Scenario(name, tuple(got), round(time.monotonic() - t0, 3)))
        if plan.get("stream"):
            wholes = {a.text: a for a in found[0].requests}
            streams = tuple(_stream_or_error(omni, build, t, wholes.get(t)) for t in plan["texts"])
        if plan.get("seed") is not None:
            try:
                seeded = _seeded(omni, build, plan["texts"], int(plan["seed"]))
            except Exception as exc:  # recorded for the seed check only
                seed_error = f"{type(exc).__name__}: {exc}"
        if example is not None:
            example_run = _run_example(example, omni, out, plan["texts"][0])
        if extra.get("worker_extension_cls"):
            t0 = time.monotonic()
            try:
                worker = _worker_run(omni, build, plan["texts"], plan)
            except Exception as exc:  # recorded for the worker checks only
                worker = WorkerRun(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
            worker = dataclasses.replace(worker, wall_s=round(time.monotonic() - t0, 3))
    except Exception as exc:  # recorded for the check that needs it
        return OfflineRun(
            startup,
            source,
            tuple(found),
            example_run,
            worker,
            streams,
            plan.get("seed"),
            seeded,
            seed_error,
            f"{type(exc).__name__}: {exc}",
            traceback.format_exc(),
        )
    finally:
        omni.close()
    return OfflineRun(startup, source, tuple(found), example_run, worker, streams, plan.get("seed"), seeded, seed_error)


def write(found: OfflineRun, out: Path) -> Path:
    path = Path(out) / OBSERVATIONS
    path.write_text(json.dumps(schema.dump(found, Path(out) / "arrays")))
    return path


def read(out: Path) -> OfflineRun | None:
    path = Path(out) / OBSERVATIONS
    return schema.load(json.loads(path.read_text()), Path(out) / "arrays") if path.is_file() else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnitts-engine-offline")
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        found = run(args.model_dir, json.loads(args.plan.read_text()), args.out)
    except Exception as exc:
        found = OfflineRun(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
    write(found, args.out)
    return 0 if found.error is None else 1


if __name__ == "__main__":
    raise SystemExit(main())
