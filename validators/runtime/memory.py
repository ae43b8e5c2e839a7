"""Memory of the model process over one check: resident set (Linux ``/proc``), and CUDA memory when on a GPU."""

from __future__ import annotations

import os
import resource

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MB = 1024 * 1024


def rss_bytes() -> int:
    """Current resident set size of this process (peak size where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cuda_bytes() -> int | None:
    try:
        import torch

        return int(torch.cuda.memory_allocated()) if torch.cuda.is_initialized() else None
    except Exception:  # noqa: BLE001 - memory reporting never fails a check
        return None


class MemoryMeter:
    """Taken when a check starts; :meth:`growth` says how much the process grew since."""

    def __init__(self, cuda: bool = False):
        self.cuda = cuda
        self.rss0 = rss_bytes()
        self.cuda0 = _cuda_bytes() if cuda else None

    def growth(self) -> dict[str, float]:
        rss1 = rss_bytes()
        out = {"rss_mb": round(rss1 / _MB, 1), "rss_growth_mb": round((rss1 - self.rss0) / _MB, 1)}
        if self.cuda:
            cuda1 = _cuda_bytes()
            if cuda1 is not None:
                out["cuda_mb"] = round(cuda1 / _MB, 1)
                out["cuda_growth_mb"] = round((cuda1 - (self.cuda0 or 0)) / _MB, 1)
        return out
