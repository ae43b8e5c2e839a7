"""The integration's side of a parity comparison: a capture's request set through the tree's own offline ``Omni``.

Runs inside the engine environment (``python -m omnitts.validators.parity.engine_run --tree T --model NAME
--model-dir DIR --capture CAPTURE --out OUT``), the tree first on ``sys.path``. It starts ``Omni`` on the model
directory (the checkpoint the reference was captured from) with a deploy overlay that makes the run comparable to a
greedy capture (the release's deploy config read in place as ``base_config``: greedy stage-0 and sub-talker sampling,
the capture's dtype on every stage, the whole-payload hand-over), and omnitts's parity worker extension
(``validators/parity/worker.py``). Each capture request is built the way the release's serving adapter builds it
(``validators/engine/serving_requests.py``) and run alone (codes the decoder received, waveform), then all of them
at once (waveforms), then the reference's codes go through the integration's decoder alone. Everything is written to
``OUT/engine.npz`` and ``OUT/result.json``; the test process compares (``validators/parity/compare.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

WORKER = "omnitts.validators.parity.worker.ParityWorkerExtension"


def deploy_overlay(model: str, dtype: str, max_tokens: int, scaffolded: bool = False) -> dict:
    """The stage fields that make ``model``'s release deploy config greedy, in ``dtype``, whole-payload hand-over."""
    if model == "qwen3_tts":
        return {
            # Whole-payload hand-over: with async chunks the code2wav stage waits forever for its first chunk on CPU
            # (docs/upstream_models.md).
            "async_chunk": False,
            "dtype": dtype,
            "stages": [
                {
                    "stage_id": 0,
                    "dtype": dtype,
                    "default_sampling_params": {
                        "temperature": 0.0,
                        "top_k": -1,
                        "top_p": 1.0,
                        "max_tokens": max_tokens,
                        "min_tokens": 2,
                        "repetition_penalty": 1.0,
                    },
                    "subtalker_sampling_params": {"do_sample": False, "temperature": 1.0, "top_k": -1, "top_p": 1.0},
                },
                {"stage_id": 1, "dtype": dtype},
            ],
        }
    if scaffolded:
        # omnitts's two-stage pattern: greedy already (temperature 0 in its deploy); whole-payload hand-over, so the
        # decoder sees each request's codes in one call
        return {
            "async_chunk": False,
            "dtype": dtype,
            "stages": [{"stage_id": 0, "dtype": dtype}, {"stage_id": 1, "dtype": dtype}],
        }
    raise SystemExit(f"parity engine run: no greedy deploy overlay for {model!r}")


def scaffold_observation(tree: Path, model: str):
    """Where a model scaffolded with omnitts's two-stage pattern decodes its codes: ``{Camel}Code2Wav.decoder``,
    called as ``decoder(codes [B, K, T])`` (templates/patterns/two-stage), or None for any other model."""
    from omnitts.knowledge.layout import model_package
    from omnitts.knowledge.references import EngineObservation
    from omnitts.scaffold.naming import camel_case

    code2wav = model_package(tree, model) / f"{model}_code2wav.py"
    cls = f"{camel_case(model)}Code2Wav"
    if not code2wav.is_file() or f"class {cls}(" not in code2wav.read_text(encoding="utf-8"):
        return None
    return EngineObservation(cls, "decoder", "forward")


def _order(outputs, n: int) -> list:
    finals = [o for o in outputs if getattr(o, "final_output_type", "audio") == "audio" and o.finished]
    if len(finals) != n:
        raise RuntimeError(f"{n} requests gave {len(finals)} final audio outputs")
    head = [str(o.request_id).split("_")[0] for o in finals]
    return [
        o for _, o in sorted(zip([int(h) if h.isdigit() else 0 for h in head], finals, strict=True), key=lambda x: x[0])
    ]


def _rpc(omni, method: str, *args) -> list[dict]:
    """One dict per worker of every stage (the parity extension's methods return dicts; the engine nests them in
    lists per stage and worker)."""
    found: list[dict] = []

    def collect(value) -> None:
        if isinstance(value, dict):
            found.append(value)
        elif isinstance(value, list | tuple):
            for item in value:
                collect(item)

    collect(omni.engine.collective_rpc(method, args=args, timeout=300))
    return found


def run(tree: Path, model: str, model_dir: Path, capture_dir: Path, out: Path, *, batch: bool = True) -> dict:
    import numpy as np
    import vllm_omni
    from vllm_omni import Omni

    from omnitts.knowledge import references
    from omnitts.knowledge.layout import tree_version
    from omnitts.validators.engine.offline import _audio
    from omnitts.validators.engine.serving_requests import builder
    from omnitts.validators.parity.capture_file import read_capture

    release = tree_version(tree)
    capture = read_capture(capture_dir)
    observation = references.engine_observation(release, model)
    scaffolded = observation is None and (observation := scaffold_observation(tree, model)) is not None
    if observation is None:
        raise SystemExit(f"parity engine run: omnitts does not know where {model} of {release} decodes its codes")
    build = builder(release, model, model_dir)
    if build is None and scaffolded:  # the scaffold's serving sends the text; the engine tokenizes it
        from omnitts.validators.engine.offline import _request

        def build(text, params=None):
            return _request(text)

    if build is None:
        raise SystemExit(f"parity engine run: no serving request builder for {model} of {release}")
    max_tokens = max(int(r.params.get("max_new_tokens", 24)) for r in capture.requests)
    base = Path(vllm_omni.__file__).parent / "deploy" / f"{model}.yaml"
    overlay = {"base_config": str(base), **deploy_overlay(model, capture.dtype, max_tokens, scaffolded)}
    (out / "omnitts_parity_deploy.yaml").write_text(json.dumps(overlay, indent=1) + "\n")
    started = time.monotonic()
    omni = Omni(
        model=str(model_dir),
        deploy_config=str(out / "omnitts_parity_deploy.yaml"),
        worker_extension_cls=WORKER,
        # A loaded 2-core machine took 460-770 s to start one engine (the release waits 600 s by default).
        stage_init_timeout=1200,
        init_timeout=1800,
    )
    result: dict = {"startup_s": round(time.monotonic() - started, 2), "release": release, "requests": {}}
    arrays: dict = {}
    try:
        spec = {
            "follow_dtype": capture.dtype == "float32",
            "dtype_attributes": list(observation.dtype_attributes),
            "decode": {
                "model_class": observation.model_class,
                "path": observation.decoder,
                "method": observation.method,
            },
        }
        result["install"] = _rpc(omni, "omnitts_parity_install", spec)
        t0 = time.monotonic()
        for req in capture.requests:
            request = build(req.text, req.params)
            (output,) = _order(omni.generate([request], None, use_tqdm=False), 1)
            wave, sr = _audio(output)
            calls = [call for worker in _rpc(omni, "omnitts_parity_take") for call in worker["calls"]]
            arrays[f"{req.id}/waveform"] = wave
            if len(calls) == 1:  # one request, one decode: the codes the integration's decoder received
                arrays[f"{req.id}/codes"] = np.asarray(calls[0]["codes"], dtype=np.int64)
                arrays[f"{req.id}/decoder_out"] = np.asarray(calls[0]["waveform"], dtype=np.float32)
            result["requests"][req.id] = {
                "sr": sr,
                "samples": int(wave.size),
                "prompt_len": len(request.get("prompt_token_ids") or ()),
                "decode_calls": len(calls),
            }
        result["solo_s"] = round(time.monotonic() - t0, 2)
        if batch:
            t0 = time.monotonic()
            requests = [build(r.text, r.params) for r in capture.requests]
            outputs = _order(omni.generate(requests, None, use_tqdm=False), len(requests))
            _rpc(omni, "omnitts_parity_take")
            for req, output in zip(capture.requests, outputs, strict=True):
                arrays[f"batch/{req.id}/waveform"] = _audio(output)[0]
            result["batch_s"] = round(time.monotonic() - t0, 2)
        for req in capture.requests:
            if req.codes is None:
                continue
            decoded = [w["waveform"] for w in _rpc(omni, "omnitts_parity_decode", req.codes.tolist()) if w["waveform"]]
            if decoded:
                arrays[f"{req.id}/decoded"] = np.asarray(decoded[0], dtype=np.float32)
    except Exception as exc:  # recorded for the check that needs it
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc()
    finally:
        omni.close()
    np.savez(out / "engine.npz", **arrays)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="omnitts-parity-engine-run")
    parser.add_argument("--tree", required=True, type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--model-dir", required=True, type=Path)
    parser.add_argument("--capture", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--no-batch", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        result = run(args.tree, args.model, args.model_dir, args.capture, args.out, batch=not args.no_batch)
    except SystemExit as exc:  # what this driver cannot run (no overlay, no decoder location): the check says it
        result = {"error": str(exc.code)}
    except Exception as exc:
        result = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    (args.out / "result.json").write_text(json.dumps(result, indent=1))
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
