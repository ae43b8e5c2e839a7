"""Drive the tree's own offline ``Omni`` for the engine tier (runs inside the engine environment).

``python -m omnitts.validators.engine.offline --model-dir DIR --plan PLAN.json --out OUT`` starts ``Omni`` once on
the model directory and runs the plan's scenarios: ``solo`` (each text alone, one after the other) and
``batches`` (lists of texts submitted together, so the scheduler batches them). Every request's final audio is
written to ``OUT/<scenario>/<index>.npy`` and described in ``OUT/result.json`` (sample rate, samples, seconds);
the checks themselves run in the test process, which compares the files. The engine's own errors are recorded in
``result.json`` under ``error`` so that the check, not the suite, fails.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path


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


def _run_example(example, omni, out: Path, text: str) -> dict:
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
        return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    return {"wavs": sorted(str(p) for p in wav_dir.glob("*.wav"))}


def _rpc(omni, method: str) -> list:
    """``method`` of omnitts's worker extension on every worker of every stage (the engine's ``collective_rpc``):
    one result per worker, stage by stage."""
    results = []
    for stage in omni.engine.collective_rpc(method, timeout=120):
        results.extend(stage if isinstance(stage, list) else [stage])
    return results


def _settled_state(omni, wait: float = 15.0) -> dict:
    """The workers' state once every request they were given has been reported finished to them (the scheduler
    tells the runner in the step after a request ends): ``settled`` says whether that happened within ``wait``."""
    deadline = time.monotonic() + wait
    while True:
        workers = _rpc(omni, "omnitts_state")
        settled = all(set(w["seen"]) <= set(w["finished"]) for w in workers)
        if settled or time.monotonic() > deadline:
            return {"workers": workers, "settled": settled}
        time.sleep(0.25)


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


def _worker_checks(omni, build, texts: list[str], plan: dict) -> dict:
    """I5 and I3 inside the workers, after the scenarios (which warmed the engine up): state after finish and after
    an abort, host syncs of steady-state steps with the spy armed, state growth over sequential requests."""
    from vllm.sampling_params import RequestOutputKind

    found: dict = {"after_finish": _settled_state(omni)}
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
    found["abort"] = {"mid_request": first is not None and not first.finished}
    found["after_abort"] = _settled_state(omni)
    # I3: armed after warm-up, 4 requests at once, up to 10 steps each (as the harness's check).
    _rpc(omni, "omnitts_sync_arm")
    omni.generate([build(t) for t in texts[:4]], _stage0_params(omni, max_tokens=10), use_tqdm=False)
    found["syncs"] = _rpc(omni, "omnitts_sync_report")
    # I5 growth: 100 short sequential requests (3 tokens each); footprint after the first and after the last.
    n, short = plan.get("sequential", 100), _stage0_params(omni, max_tokens=3)
    omni.generate([build(texts[0])], short, use_tqdm=False)
    base = _settled_state(omni)
    for i in range(1, n):
        omni.generate([build(texts[i % len(texts)])], short, use_tqdm=False)
    found["growth"] = {"requests": n, "base": base, "after": _settled_state(omni)}
    return found


# Keys of the plan passed on to ``Omni(...)``: per-stage devices when the session has two or more GPUs
# (runtime.StagePlacement.omni_kwargs), omnitts's worker extension for the in-worker I5/I3 checks (collective RPC),
# ``load_format`` ("dummy" with --dummy-weights) and the model directory's own ``deploy_config``
# (pytest_options.engine_kwargs).
OMNI_KEYS = ("stage_overrides", "worker_extension_cls", "load_format", "deploy_config")


def omni_kwargs(plan: dict) -> dict:
    """The keyword arguments of ``Omni(model=..., ...)`` the plan asks for (beyond ``stage_init_timeout``)."""
    return {key: plan[key] for key in OMNI_KEYS if plan.get(key)}


def run(model_dir: str, plan: dict, out: Path) -> dict:
    import numpy as np
    from vllm_omni import Omni

    started = time.monotonic()
    extra = omni_kwargs(plan)
    omni = Omni(model=model_dir, stage_init_timeout=plan.get("stage_init_timeout", 300), **extra)
    result: dict = {"startup_s": round(time.monotonic() - started, 2), "scenarios": {}}
    scenarios = {"solo": [[t] for t in plan["texts"]]}
    scenarios.update({f"batch{i}": texts for i, texts in enumerate(plan.get("batches", []))})
    example = _load_example(plan.get("example"))
    info = plan.get("request_info")
    if example is not None and hasattr(example, "build_request"):
        build, result["requests_from"] = example.build_request, "example"
    elif info:
        base = _request
        build, result["requests_from"] = (lambda text: _with_info(base(text), info)), "omnitts+request_info"
    else:
        build, result["requests_from"] = _request, "omnitts"
    try:
        if extra.get("worker_extension_cls"):
            result["worker_install"] = _rpc(omni, "omnitts_install")  # before any request reaches a worker
        for name, groups in scenarios.items():
            if name == "solo":
                calls = groups
            else:
                calls = [groups]
            rows = []
            t0 = time.monotonic()
            for texts in calls:
                # Sampling parameters: each stage's defaults from the model's deploy config (greedy there).
                outputs = omni.generate([build(t) for t in texts], None, use_tqdm=False)
                finals = [o for o in outputs if getattr(o, "final_output_type", "audio") == "audio" and o.finished]
                if len(finals) != len(texts):
                    raise RuntimeError(f"{name}: {len(texts)} requests gave {len(finals)} final audio outputs")
                order = sorted(
                    finals,
                    key=lambda o: (
                        int(str(o.request_id).split("_")[0]) if str(o.request_id).split("_")[0].isdigit() else 0
                    ),
                )
                for text, output in zip(texts, order, strict=True):
                    wave, sr = _audio(output)
                    index = len(rows)
                    (out / name).mkdir(parents=True, exist_ok=True)
                    np.save(out / name / f"{index}.npy", wave)
                    rows.append(
                        {
                            "text": text,
                            "request_id": str(output.request_id),
                            "sr": sr,
                            "samples": int(wave.size),
                            "seconds": wave.size / sr if sr else None,
                        }
                    )
            result["scenarios"][name] = {"rows": rows, "wall_s": round(time.monotonic() - t0, 3)}
        if example is not None:
            result["example"] = _run_example(example, omni, out, plan["texts"][0])
        if extra.get("worker_extension_cls"):
            t0 = time.monotonic()
            try:
                result["worker"] = _worker_checks(omni, build, plan["texts"], plan)
            except Exception as exc:  # recorded for the worker checks only
                result["worker"] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            result["worker"]["wall_s"] = round(time.monotonic() - t0, 3)
    except Exception as exc:  # recorded for the check that needs it
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()
    finally:
        omni.close()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnitts-engine-offline")
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--plan", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        result = run(args.model_dir, json.loads(args.plan.read_text()), args.out)
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    (args.out / "result.json").write_text(json.dumps(result, indent=1))
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    raise SystemExit(main())
