"""Which functions of a file the runner drives once per request per step, beyond the loops the
module index sees: the per-request hooks (the knowledge layer's ``per_step_hooks`` with
``per == "request"``: ``preprocess``, ``postprocess``) and the helpers they reach.

Not here: stage-input processors' `*_async_chunk` functions. They run per request per step too, but
in the scheduler process on the runner's pooler output, which reached it serialized on the host
(gpu_ar_model_runner copies the multimodal outputs to the CPU once per step): their `.cpu()`,
`.tolist()` and `.item()` calls are host work (the corpus keeps two of them as look-alikes).

The closure over in-file callees is computed once per file with the index's call graph (no
re-parsing), so it stays linear in the number of calls.
"""

from __future__ import annotations

from omnitts.validators.static.index import ModuleIndex


def per_request_entries(index: ModuleIndex) -> set[str]:
    """Qualnames whose whole body runs per request per step (the per-request hooks themselves); `preprocess`
    mixes prefill-only work in, so only hooks without it count."""
    out = set()
    for fn in index.functions.values():
        hook = index.hook(fn)
        if hook is not None and hook.per == "request" and not hook.prefill_work:
            out.add(fn.qualname)
    return out


def closure(index: ModuleIndex, seeds: set[str]) -> set[str]:
    """Seeds and every in-file function they reach (guarded calls excluded, as the index does)."""
    seen: set[str] = set()
    work = [index.functions[q] for q in seeds if q in index.functions]
    while work:
        fn = work.pop()
        if fn.qualname in seen:
            continue
        seen.add(fn.qualname)
        for target, _in_loop, guarded in index.callees(fn):
            if not guarded and target.qualname not in seen:
                work.append(target)
    return seen


def extra_hot(src) -> tuple[set[str], set[str]]:
    """(per-step, hot) qualnames this file adds to the index's own: cached on the source file."""
    cached = src.__dict__.get("_hooks")
    if cached is None:
        index = src.index
        hot = closure(index, per_request_entries(index))
        cached = (hot, hot)  # the per-step hooks themselves are the index's entries
        src.__dict__["_hooks"] = cached
    return cached
