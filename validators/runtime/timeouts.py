"""Per-check deadlines that stop a slow or hanging model without signals.

When the deadline passes, the harness stops at its next model call (a clean :class:`CheckTimeout` between
calls, see :func:`check`). If the model is stuck *inside* one call, a watchdog thread raises
:class:`CheckTimeout` in the checking thread after a grace period (``PyThreadState_SetAsyncExc``), so the
traceback shows the model line that was spinning and the suite goes on. No SIGALRM: this coexists with
pytest-timeout and runs in pytest-xdist workers. A model stuck inside one long C call is interrupted when that
call returns.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading

_local = threading.local()


class CheckTimeout(BaseException):  # not Exception: a model's `except Exception` must not swallow it
    """A check's model work exceeded its deadline."""


def check() -> None:
    """Raise CheckTimeout if the innermost active deadline of this thread has passed (called between model calls)."""
    stack = getattr(_local, "stack", None)
    if stack and stack[-1].is_set():
        raise CheckTimeout(getattr(stack[-1], "message", "deadline exceeded"))


@contextlib.contextmanager
def deadline(seconds: float | None, what: str = "check", grace: float = 2.0):
    if not seconds or seconds <= 0:
        yield
        return
    target = threading.get_ident()
    done = threading.Event()
    expired = threading.Event()
    expired.message = f"{what} exceeded its {seconds:g} s deadline (hang?)"
    fired = []
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(expired)

    def watchdog():
        if done.wait(seconds):
            return
        expired.set()  # soft stop: the harness raises at its next model call
        if done.wait(grace):
            return
        fired.append(True)  # hard stop: the model is stuck inside one call
        exc = type(
            "CheckTimeout", (CheckTimeout,), {"__init__": lambda self, *a: CheckTimeout.__init__(self, expired.message)}
        )
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(exc))

    t = threading.Thread(target=watchdog, name=f"omnitts-deadline-{what}", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()
        stack.remove(expired)
        if fired:
            # the async exception may still be pending if it fired during this cleanup: clear it
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)
