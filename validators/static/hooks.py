"""Which functions of a file the runner drives once per request per step, beyond the loops the
module index sees: the per-request hooks and the helpers they reach.

- `postprocess` (and `<stage>_postprocess` helpers it dispatches to) runs once for every scheduled
  request after every forward: its whole body is per request per step.
- `talker_mtp` runs once per decode step (the runner's MTP hook).

Not here: stage-input processors' `*_async_chunk` functions. They run per request per step too, but
in the scheduler process on the runner's pooler output, which reached it serialized on the host
(gpu_ar_model_runner copies the multimodal outputs to the CPU once per step): their `.cpu()`,
`.tolist()` and `.item()` calls are host work (the corpus keeps two of them as look-alikes).

The closure over in-file callees is computed once per file with the index's call graph (no
re-parsing), so it stays linear in the number of calls.
"""

from __future__ import annotations

import re

from omnitts.validators.static.index import ModuleIndex

PER_REQUEST_HOOK = re.compile(r"^(?:\w+_)?postprocess$")
PER_STEP_HOOKS = frozenset({"talker_mtp"})


def per_request_entries(index: ModuleIndex) -> set[str]:
    """Qualnames whose whole body runs per request per step (the hooks themselves)."""
    return {fn.qualname for fn in index.functions.values() if fn.cls is not None and PER_REQUEST_HOOK.match(fn.name)}


def per_step_entries(index: ModuleIndex) -> set[str]:
    """Per-step runner hooks the index does not list as entries."""
    return {fn.qualname for fn in index.functions.values() if fn.cls is not None and fn.name in PER_STEP_HOOKS}


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
        step = closure(index, per_step_entries(index)) | hot
        cached = (step, hot)
        src.__dict__["_hooks"] = cached
    return cached
