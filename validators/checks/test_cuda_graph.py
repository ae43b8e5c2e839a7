"""Phase 5 — CUDA graph: the AR step captured and replayed gives the same tokens as eager; speedup reported."""

from __future__ import annotations

import copy
import time

import pytest
import torch

from omnitts.validators import checkids
from omnitts.validators.runtime.scenarios import compositions

pytestmark = pytest.mark.usefixtures("omnitts_model")


def _stage0_seconds(run) -> float:
    return sum(s.seconds for s in run.steps if s.stage == 0 and s.steady)


@pytest.mark.omnitts_check(checkids.CUDA_GRAPH_REPLAY)
def test_cuda_graph_matches_eager(ctx, record):
    if ctx.options.device != "cuda":
        pytest.skip("CUDA-graph check needs --device cuda")
    if not torch.cuda.is_available():
        pytest.fail("--device cuda but torch.cuda.is_available() is False", pytrace=False)
    sub = ctx.subject
    cfg = sub.ar_stage.config
    if sub.graph_step is not None:
        res = sub.graph_step(device=ctx.options.device)
        record(**res)
        if not res.get("tokens_equal", False):
            pytest.fail(f"CUDA graph: replayed tokens differ from eager: {res}", pytrace=False)
        return
    if cfg is None or not hasattr(cfg, "use_cuda_graph"):
        pytest.skip("the AR stage exposes no CUDA-graph switch (config.use_cuda_graph) nor Subject.graph_step")
    plans, kw = compositions(sub)["all_at_once"]
    timings, tokens = {}, {}
    for mode in (False, True):
        mcfg = copy.deepcopy(cfg)
        mcfg.use_cuda_graph = mode
        stage0 = sub.stages[0]
        models = [stage0.cls(config=mcfg)] + [st.factory() for st in sub.stages[1:]]
        models = [m.to(ctx.options.device).eval() for m in models]
        eng = ctx.engine(models=models, **kw)
        eng.run(plans, f"graph-warmup-{mode}")  # captures the graphs of every batch size the scenario uses
        eng.timed_calls = {(0, "preprocess"), (0, "__call__"), (0, "compute_logits")}
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run = eng.run(plans, f"graph-{mode}")
        torch.cuda.synchronize()
        timings[mode] = {
            "wall_s": time.perf_counter() - t0,
            "stage0_steady_s": _stage0_seconds(run),
            "ar_step_s": sum(eng.call_seconds.values()),  # preprocess + forward + compute_logits, synchronized
            "forward_s": eng.call_seconds.get((0, "__call__"), 0.0),
        }
        tokens[mode] = {e: r.tokens for e, r in run.requests.items()}
    same = tokens[True] == tokens[False]
    eager, graph = timings[False]["ar_step_s"], timings[True]["ar_step_s"]
    speedup = eager / graph if graph > 0 else float("nan")
    record(
        tokens_equal=same,
        eager_ar_step_s=round(eager, 5),
        graph_ar_step_s=round(graph, 5),
        speedup=round(speedup, 3),
        forward_speedup=round(timings[False]["forward_s"] / timings[True]["forward_s"], 3)
        if timings[True]["forward_s"]
        else None,
        eager_stage0_s=timings[False]["stage0_steady_s"],
        graph_stage0_s=timings[True]["stage0_steady_s"],
        wall_eager_s=timings[False]["wall_s"],
        wall_graph_s=timings[True]["wall_s"],
    )
    if not same:
        diff = [e for e in tokens[True] if tokens[True][e] != tokens[False][e]]
        pytest.fail(f"CUDA graph: replayed tokens differ from eager for {diff}", pytrace=False)
