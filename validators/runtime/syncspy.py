"""Host-sync detection (invariant I3) on CPU and CUDA, attributed to the model's source line.

CPU: a ``TorchDispatchMode`` records ``aten._local_scalar_dense`` (what ``.item()``, ``bool()``,
``int()`` and ``float()`` of a tensor reach), ``aten.nonzero`` and device->host ``aten._to_copy``.
CPU tensors dispatch nothing for ``.tolist()``, ``.cpu()``, ``.numpy()`` and ``.to("cpu")``, so while the
spy is armed those tensor methods are wrapped as well (measured on torch 2.11/2.13, see
/work/shared/research/runtime_and_environment_facts.md).

CUDA: additionally ``torch.cuda.set_sync_debug_mode("warn")`` is armed (only after warm-up: arming it
around CUDA-graph capture raises) and every warning it emits is recorded with the Python stack at
that moment.

Under ``torch.inference_mode()`` (how vLLM runs models) ``.item()``/``int()``/``float()`` reach Python
dispatch as ``aten.item`` and ``bool()`` as ``aten.is_nonzero``; both are recorded too.

Every event is attributed to the innermost frame that lies in the model's own source files, so the
report names the line that synced (``modeling_x.py:123 in forward: codes.item()``). A sync on a line that carries
(or follows) the static validators' suppression ``# omnitts: ignore[OMNI-I3-...] reason`` is reported with its
reason but does not count against the budget: one suppression serves both tiers.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import re
import sys
import threading
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from omnitts.validators.observations.state import HARNESS, OUTSIDE, UNKNOWN

_HERE = str(Path(__file__).resolve().parent)
_SELF = str(Path(__file__).resolve())
_VALIDATORS = str(Path(__file__).resolve().parents[1])  # omnitts's validators: the harness, its backends, the worker
_WARNINGS = str(Path(warnings.__file__).resolve())  # the frame that calls showwarning() for sync-debug warnings
_TORCH = str(Path(torch.__file__).resolve().parent)


_SUPPRESS = re.compile(r"#\s*omnitts:\s*ignore\[([^\]]*OMNI-I3[^\]]*)\]\s*(.*)")


@dataclass
class SyncEvent:
    op: str
    where: str  # "path:line in func: source"
    in_model: bool
    label: str  # step label, e.g. "stage0 step 7"
    suppressed: str | None = None  # reason of an `# omnitts: ignore[OMNI-I3-...] reason` on the line or above


@dataclass
class SyncReport:
    events: list[SyncEvent] = field(default_factory=list)
    steps: dict[str, int] = field(default_factory=dict)  # label -> syncs in that step (dispatch spy + wrappers)
    # CUDA only: what torch.cuda.set_sync_debug_mode("warn") reported, counted separately
    debug_events: list[SyncEvent] = field(default_factory=list)
    debug_steps: dict[str, int] = field(default_factory=dict)

    def by_site(self) -> Counter:
        return Counter(f"{e.op} at {e.where}" for e in self.events)

    @property
    def total(self) -> int:
        return len(self.events)

    def summary(self, limit: int = 8) -> str:
        if not self.events:
            return "no host syncs"
        lines = [f"{n}x {site}" for site, n in self.by_site().most_common(limit)]
        return "\n".join(lines)


def _is_cpu_device(arg) -> bool:
    if isinstance(arg, str):
        return arg == "cpu" or arg.startswith("cpu:")
    if isinstance(arg, torch.device):
        return arg.type == "cpu"
    return False


@functools.lru_cache(maxsize=8192)
def _real(filename: str) -> str:
    """A frame's file as its real path: the model's files and omnitts's own are compared resolved, so a checkout
    reached through symbolic links (the GPU machine's shim maps the repo's folders onto ``omnitts.*`` by links)
    still places a sync on the model's line; compared unresolved, every frame looked foreign there."""
    if filename.startswith("<"):
        return filename
    try:
        return str(Path(filename).resolve())
    except (OSError, RuntimeError):
        return filename


_WARM = []


def warm_up() -> None:
    """Entering a TorchDispatchMode the first time imports torch._dynamo (~3 s): do it once, outside deadlines."""
    if _WARM:
        return
    import torch._dynamo  # noqa: F401

    class _Noop(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with _Noop():
        torch.ones(1) + 1
    _WARM.append(True)


class SyncSpy:
    """Arm with ``with spy.armed(label):`` around model calls; read ``spy.report`` afterwards."""

    def __init__(self, model_files: list[Path] | None = None, device: str = "cpu"):
        warm_up()
        roots = []
        for p in model_files or []:
            p = Path(p).resolve()
            roots.append(str(p))
        self._roots = tuple(roots)
        self.device = device
        self.report = SyncReport()
        self._label = ""
        self._depth = 0
        self._lock = threading.Lock()
        self._cuda_armed = False

    # -- attribution ------------------------------------------------------------------------------
    def _in_model(self, filename: str) -> bool:
        if not self._roots:
            return not (filename.startswith(_TORCH) or filename.startswith(_HERE))
        return any(filename == r or filename.startswith(r.rstrip("/") + "/") for r in self._roots)

    def _site(self, skip: int = 2) -> tuple[str, bool]:
        where, in_model, _ = self._site_full(skip + 1)
        return where, in_model

    @staticmethod
    def _suppression(fn: str, line: int) -> str | None:
        for n in (line, line - 1):
            m = _SUPPRESS.search(linecache.getline(fn, n))
            if m:
                return f"[{m.group(1)}] {m.group(2).strip()}"
        return None

    def _site_full(self, skip: int = 2) -> tuple[str, bool, str | None]:
        """(where, in the model's files, suppression reason) of the innermost model frame.

        A sync with no model frame on the stack is attributed all the same, never to nothing: to the innermost frame
        outside torch, prefixed ``HARNESS`` when it lies in omnitts's validators (the harness synced, not the model)
        and ``OUTSIDE`` otherwise (e.g. the serving runner's code), so every event names a line and who owns it."""
        frame = sys._getframe(skip)
        first = None
        while frame is not None:
            fn = _real(frame.f_code.co_filename)
            if self._in_model(fn):
                return self._fmt(frame), True, self._suppression(fn, frame.f_lineno)
            if first is None and not fn.startswith(_TORCH) and fn not in (_SELF, _WARNINGS) and "<frozen" not in fn:
                first = frame
            frame = frame.f_back
        if first is None:
            return UNKNOWN, False, None
        prefix = HARNESS if _real(first.f_code.co_filename).startswith(_VALIDATORS) else OUTSIDE
        return f"{prefix}{self._fmt(first)}", False, None

    @staticmethod
    def _fmt(frame) -> str:
        fn, line = frame.f_code.co_filename, frame.f_lineno
        src = linecache.getline(fn, line).strip()
        return f"{fn}:{line} in {frame.f_code.co_name}: {src}"

    def _record(self, op: str, skip: int = 3) -> None:
        where, in_model, suppressed = self._site_full(skip)
        with self._lock:
            self.report.events.append(SyncEvent(op, where, in_model, self._label, suppressed))
            if suppressed is None:  # suppressed syncs are reported but do not count against the budget
                self.report.steps[self._label] = self.report.steps.get(self._label, 0) + 1

    # -- arming -----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def armed(self, label: str):
        if self._depth:
            yield self
            return
        self._label = label
        self.report.steps.setdefault(label, 0)
        self._depth += 1
        patches = self._patch_methods()
        mode = _DispatchSpy(self)
        cuda = self.device.startswith("cuda") and torch.cuda.is_available()
        try:
            with mode, warnings.catch_warnings():
                if cuda:
                    warnings.simplefilter("always")
                    old_show = warnings.showwarning
                    warnings.showwarning = self._on_warning
                    torch.cuda.set_sync_debug_mode("warn")
                try:
                    yield self
                finally:
                    if cuda:
                        torch.cuda.set_sync_debug_mode("default")
                        warnings.showwarning = old_show
        finally:
            for owner, name, orig in patches:
                setattr(owner, name, orig)
            self._depth -= 1

    def _on_warning(self, message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "synchroniz" in text.lower():
            where, in_model, suppressed = self._site_full(2)
            with self._lock:
                self.report.debug_events.append(
                    SyncEvent("cuda sync (set_sync_debug_mode)", where, in_model, self._label, suppressed)
                )
                if suppressed is None:
                    self.report.debug_steps[self._label] = self.report.debug_steps.get(self._label, 0) + 1

    def _patch_methods(self):
        spy = self
        patches = []
        tensor = torch.Tensor
        cuda_run = self.device.startswith("cuda")

        def wrap(name, predicate=None):
            orig = getattr(tensor, name)

            def wrapper(self_t, *args, **kwargs):
                # a CPU run's host reads stand for the device->host syncs a GPU run would make; on a GPU run a CPU
                # tensor's .numpy()/.tolist() syncs nothing (its real syncs come from set_sync_debug_mode)
                if (
                    spy._depth
                    and not cuda_run
                    and self_t.device.type == "cpu"
                    and (predicate is None or predicate(args, kwargs))
                ):
                    spy._record(f"Tensor.{name}", skip=2)
                return orig(self_t, *args, **kwargs)

            wrapper.__name__ = name
            patches.append((tensor, name, orig))
            setattr(tensor, name, wrapper)

        def to_cpu(args, kwargs):
            # only a literal "cpu" string: `.to(device)` with the model's own torch.device is a no-op on a CPU
            # run but a host->device copy on GPU, never a sync; `.to("cpu")` is a device->host copy on GPU
            target = kwargs.get("device", args[0] if args else None)
            return isinstance(target, str) and _is_cpu_device(target)

        wrap("tolist")
        wrap("cpu")
        wrap("numpy")
        wrap("to", to_cpu)
        return patches


class _DispatchSpy(TorchDispatchMode):
    # under torch.inference_mode() (how vLLM runs models) CompositeImplicit ops are not decomposed before
    # Python dispatch: .item()/int()/float() arrive as aten.item and bool() as aten.is_nonzero instead of
    # aten._local_scalar_dense (measured on torch 2.13 CPU)
    _SCALAR = {
        torch.ops.aten._local_scalar_dense.default,
        torch.ops.aten.item.default,
        torch.ops.aten.is_nonzero.default,
    }
    _NONZERO = {torch.ops.aten.nonzero.default}

    def __init__(self, spy: SyncSpy):
        super().__init__()
        self.spy = spy

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self._SCALAR:
            self.spy._record("aten._local_scalar_dense (.item()/bool()/int()/float() of a tensor)")
        elif func in self._NONZERO:
            self.spy._record("aten.nonzero (data-dependent shape)")
        elif func is torch.ops.aten._to_copy.default:
            src = args[0] if args else None
            dev = kwargs.get("device")
            if isinstance(src, torch.Tensor) and src.device.type != "cpu" and dev is not None and _is_cpu_device(dev):
                self.spy._record("aten._to_copy device->host")
        return func(*args, **kwargs)


def graph_breaks(fn, *args, **kwargs) -> dict:
    """Run ``torch._dynamo.explain`` on one call; return counts and readable break reasons."""
    import torch._dynamo as dynamo

    dynamo.reset()
    try:
        out = dynamo.explain(fn)(*args, **kwargs)
    finally:
        dynamo.reset()
    reasons = []
    for br in getattr(out, "break_reasons", []) or []:
        where = ""
        stack = getattr(br, "user_stack", None) or []
        if stack:
            fr = stack[-1]
            where = f"{fr.filename}:{fr.lineno}"
        reasons.append({"reason": str(getattr(br, "reason", br)).splitlines()[0][:300], "where": where})
    return {
        "graph_count": int(getattr(out, "graph_count", 0)),
        "graph_break_count": int(getattr(out, "graph_break_count", 0)),
        "op_count": int(getattr(out, "op_count", 0)),
        "break_reasons": reasons,
    }
