"""Per-check deadlines that interrupt a hanging model without signals.

A watchdog thread raises :class:`CheckTimeout` *inside* the thread that runs the check (via
``PyThreadState_SetAsyncExc``), so the traceback shows the model line that was spinning and the suite
goes on. This does not use SIGALRM, so it coexists with pytest-timeout and with pytest-xdist workers.
A model stuck inside one long C call is interrupted when that call returns.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading


class CheckTimeout(BaseException):  # not Exception: a model's `except Exception` must not swallow it
    """A check's model work exceeded its deadline."""


@contextlib.contextmanager
def deadline(seconds: float | None, what: str = "check"):
    if not seconds or seconds <= 0:
        yield
        return
    target = threading.get_ident()
    done = threading.Event()
    fired = []

    def watchdog():
        if not done.wait(seconds):
            fired.append(True)
            exc = type("CheckTimeout", (CheckTimeout,), {"__init__": lambda self, *a: CheckTimeout.__init__(self, f"{what} exceeded its {seconds:g} s deadline (hang?)")})
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(exc))

    t = threading.Thread(target=watchdog, name=f"omnitts-deadline-{what}", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()
        if fired:
            # the async exception may still be pending if it fired during this cleanup: clear it
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)
