"""What bounds the CUDA-graph speedup of a reference model's AR step: per-call times, batch sizes, kernel launches.

    python benchmarks/cuda_graph_bound.py [--model ref_two_stage] [--repeats 5] [--out cuda_graph_bound.json]

The ``cuda_graph.replay`` check times one AR step as preprocess + forward + compute_logits of stage 0, each call
synchronized, over the steady steps of the all-at-once scenario, eager (``use_cuda_graph=False``) against graphed.
Here the same run is taken apart: the seconds of each call kind in both modes (best of ``--repeats``), the steady
steps per batch size and whether that size has a captured graph (``config.cuda_graph_batch_sizes``), and, from one
profiled run per mode, the CUDA kernels launched and graphs replayed, with the device's busy time. The speedup of
the step is then (a + f_eager) / (a + f_graph), a = the calls the graph does not cover; the forward's own speedup is
bounded by how much of its eager time is launch overhead rather than kernel time.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from collections import Counter
from pathlib import Path

import torch

CALLS = ((0, "preprocess"), (0, "__call__"), (0, "compute_logits"))


def catalogs() -> tuple:
    """The installed model catalogs; the reference models' own where none is registered (the GPU machine's shim of
    the repo's folders has no entry points)."""
    import importlib

    from omnitts.validators.runtime.catalogs import installed

    return installed() or (importlib.import_module("omnitts.reference_models.names"),)


def _runner():
    from omnitts.validators.runtime import harness

    return getattr(harness, "Harness", None) or harness.Engine  # the harness's class, under either name


def _models(sub, use_graph: bool, device: str):
    cfg = copy.deepcopy(sub.ar_stage.config)
    cfg.use_cuda_graph = use_graph
    models = [sub.stages[0].cls(config=cfg)] + [st.factory() for st in sub.stages[1:]]
    return [m.to(device).eval() for m in models]


def _profile(eng, plans) -> dict:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        eng.run(copy.deepcopy(plans), "profiled")
        torch.cuda.synchronize()
    launches = Counter()
    kernel_us = 0.0
    for ev in prof.events():
        name = ev.name
        if name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaGraphLaunch", "cuGraphLaunch"):
            launches[name] += 1
        # the device time of the kernels each host-side op launched (every kernel counted once, under its op)
        if getattr(ev, "device_type", None) == torch.autograd.DeviceType.CPU:
            kernel_us += getattr(ev, "self_device_time_total", 0.0) or 0.0
    return {"launches": dict(launches), "kernel_busy_s": round(kernel_us / 1e6, 5)}


_NO_KERNEL = {
    "view",
    "_unsafe_view",
    "expand",
    "t",
    "transpose",
    "select",
    "slice",
    "unsqueeze",
    "squeeze",
    "alias",
    "detach",
    "as_strided",
    "permute",
    "split",
    "unbind",
    "_reshape_alias",
    "empty",
    "empty_like",
    "lift_fresh",
    "size",
    "stride",
    "sym_size",
    "sym_stride",
    "is_same_size",
    "result_type",
}


def op_counts(name: str, device: str) -> dict:
    """Device operations (aten ops that launch a kernel on CUDA; views and allocations left out) per steady AR step,
    per call kind, and how many of the forward's run inside the code predictor's graphable loop (``run()``): the
    graph replaces those with one launch, the rest still launch one by one. Device-independent: runs on CPU too."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from omnitts.validators.runtime.harness import PASS
    from omnitts.validators.runtime.loaders import load_subject
    from omnitts.validators.runtime.scenarios import compositions

    sub = load_subject(name, catalogs(), device=device)
    plans, kw = compositions(sub)["all_at_once"]
    models = _models(sub, False, device)
    predictor = next((m for m in models[0].modules() if hasattr(m, "_static_loops")), None)
    counts: Counter = Counter()
    where = {"call": None, "in_loop": False}

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            op = func.overloadpacket.__name__
            if op not in _NO_KERNEL:
                counts[(where["call"], where["in_loop"])] += 1
            return func(*args, **(kwargs or {}))

    if predictor is not None:
        orig_run = predictor.run

        def run(*a, **k):
            where["in_loop"] = True
            try:
                return orig_run(*a, **k)
            finally:
                where["in_loop"] = False

        predictor.run = run
    steps = Counter()

    def intercept(stage, method, fn, args, kwargs):
        if stage != 0 or (0, method) not in CALLS:
            return PASS
        decoding = method != "__call__" or kwargs["input_ids"].shape[0] == len(
            kwargs.get("runtime_additional_information") or [1]
        )
        if not decoding:
            return PASS
        steps[method] += 1
        where["call"] = method
        try:
            with torch.inference_mode(), Count():
                return fn(*args, **kwargs)
        finally:
            where["call"] = None

    eng = _runner()(sub, device=device, models=models, **kw)
    eng.intercept = intercept
    eng.run(copy.deepcopy(plans), "ops")
    n = steps["__call__"] or 1
    per_step = {m: round(sum(v for (c, _), v in counts.items() if c == m) / n, 1) for _, m in CALLS}
    in_loop = round(counts[("__call__", True)] / n, 1)
    total = sum(per_step.values())
    return {
        "decode_steps": n,
        "device_ops_per_step": per_step,
        "forward_ops_in_graphable_loop_per_step": in_loop,
        "ops_per_step_total": round(total, 1),
        "share_of_step_ops_the_graph_covers": round(in_loop / total, 3) if total else None,
    }


def measure(name: str, repeats: int, device: str) -> dict:
    from omnitts.validators.runtime.loaders import load_subject
    from omnitts.validators.runtime.scenarios import compositions

    sub = load_subject(name, catalogs(), device=device)
    plans, kw = compositions(sub)["all_at_once"]
    graphed = set(getattr(sub.ar_stage.config, "cuda_graph_batch_sizes", ()) or ())
    out: dict = {"model": name, "device": device, "graph_batch_sizes": sorted(graphed), "modes": {}}
    for use_graph in (False, True):
        eng = _runner()(sub, device=device, models=_models(sub, use_graph, device), **kw)
        eng.run(copy.deepcopy(plans), "warmup")  # captures every batch size's graph before timing
        best: dict | None = None
        for _ in range(repeats):
            eng.timed_calls = set(CALLS)
            eng.call_seconds = {}
            torch.cuda.synchronize() if device == "cuda" else None
            t0 = time.perf_counter()
            run = eng.run(copy.deepcopy(plans), "timed")
            torch.cuda.synchronize() if device == "cuda" else None
            wall = time.perf_counter() - t0
            calls = {method: round(eng.call_seconds.get((0, method), 0.0), 6) for _, method in CALLS}
            total = sum(calls.values())
            if best is None or total < best["ar_step_s"]:
                steady = [len(s.req_ids) for s in run.steps if s.stage == 0 and s.steady]
                best = {
                    "ar_step_s": round(total, 6),
                    "calls_s": calls,
                    "wall_s": round(wall, 5),
                    "steady_steps": len(steady),
                    "steady_batch_sizes": dict(Counter(steady)),
                    "steady_steps_graphable": sum(1 for b in steady if b in graphed),
                }
        if device == "cuda":
            eng.timed_calls = None
            try:
                best.update(_profile(eng, plans))
            except Exception as exc:  # noqa: BLE001 - the timings stand without the profile
                best["profile_error"] = f"{type(exc).__name__}: {exc}"
        out["modes"]["graph" if use_graph else "eager"] = best
    e, g = out["modes"]["eager"], out["modes"]["graph"]
    out["speedup"] = round(e["ar_step_s"] / g["ar_step_s"], 3) if g["ar_step_s"] else None
    out["forward_speedup"] = (
        round(e["calls_s"]["__call__"] / g["calls_s"]["__call__"], 3) if g["calls_s"]["__call__"] else None
    )
    outside = g["ar_step_s"] - g["calls_s"]["__call__"]
    out["share_outside_forward_graphed"] = round(outside / g["ar_step_s"], 3) if g["ar_step_s"] else None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="ref_two_stage")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default=None)
    ap.add_argument("--ops-only", action="store_true", help="only the device-op counts (no timing; CPU is fine)")
    args = ap.parse_args(argv)
    if args.ops_only:
        res = {"model": args.model, "device": args.device}
    else:
        res = measure(args.model, args.repeats, args.device)
    res["ops"] = op_counts(args.model, args.device)
    print(json.dumps(res, indent=1))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
