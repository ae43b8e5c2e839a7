"""Per-check deadlines that stop a slow or hanging model, also inside a blocking call.

Three stages, each only if the previous one did not end the model work:

1. soft stop at the deadline: the harness raises :class:`CheckTimeout` at its next model call (:func:`check`);
2. hard stop ``grace`` seconds later: the stack of the stuck call is taken (``sys._current_frames``) and the
   checking thread is interrupted. In the main thread (pytest, and pytest-xdist workers, run tests there) a
   signal is sent to that thread with ``pthread_kill``: a blocking system call (``time.sleep``, a socket read, a
   lock wait) returns EINTR and the handler raises :class:`CheckTimeout` right there, so the traceback ends at
   the model's stuck line. Off the main thread only pure-Python code can be interrupted
   (``PyThreadState_SetAsyncExc``). The handler is installed for the deadline only and hands signals it did not
   cause to the previous handler, so pytest-timeout's SIGALRM keeps working;
3. last resort ``kill_after`` seconds later (a C call that holds the GIL or retries on EINTR): ``faulthandler``
   (a C thread that needs no GIL) writes every thread's stack and ends the process. It writes them to the file
   :func:`dump_stacks_to` names (the validators give each check process one in the run folder), not to stderr,
   which pytest captures and loses with the process: the results gathering puts that stack into the check's failure.
   Under pytest-xdist only that worker dies and xdist reports its check as crashed; a single pytest process dies,
   and the results are written by the watcher of :mod:`omnitts.validators.runtime.results`.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import os
import signal
import sys
import threading
import traceback
from pathlib import Path

_local = threading.local()
SIGNAL = signal.SIGALRM
# seconds after the hard stop before the process is ended (OMNITTS_KILL_AFTER: shorter in omnitts's own tests)
KILL_AFTER = float(os.environ.get("OMNITTS_KILL_AFTER") or 20.0)
_stack_file: list = []  # the open file faulthandler writes to (kept open: faulthandler holds only its descriptor)


def dump_stacks_to(path: Path | None) -> None:
    """From now on faulthandler writes this process's stacks to ``path`` when it ends it (the last resort above) or
    when the process crashes (a segfault in native code); None: back to stderr."""
    while _stack_file:
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            faulthandler.disable()
            _stack_file.pop().close()
    if path is None:
        if sys.__stderr__ is not None:
            faulthandler.enable(file=sys.__stderr__, all_threads=True)
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "w", encoding="utf-8")  # noqa: SIM115 - open for the rest of the process
    _stack_file.append(f)
    faulthandler.enable(file=f, all_threads=True)


def _dump_target():
    return _stack_file[-1] if _stack_file else sys.__stderr__


class CheckTimeout(BaseException):  # not Exception: a model's `except Exception` must not swallow it
    """A check's model work exceeded its deadline; ``stack`` is where the model was when it was stopped."""

    def __init__(self, message: str = "deadline exceeded", stack: str = ""):
        super().__init__(message)
        self.stack = stack


def check() -> None:
    """Raise CheckTimeout if the innermost active deadline of this thread has passed (called between model calls)."""
    stack = getattr(_local, "stack", None)
    if stack and stack[-1].expired.is_set():
        raise CheckTimeout(stack[-1].message)


def _stack_of(thread_id: int, outer) -> str:
    """The thread's current stack, from ``outer`` (the frame that set the deadline) down to the stuck call."""
    frame = sys._current_frames().get(thread_id)
    frames = []
    while frame is not None:
        frames.append((frame, frame.f_lineno))
        if frame is outer:
            break
        frame = frame.f_back
    return "".join(traceback.StackSummary.extract(reversed(frames)).format())


class _Deadline:
    def __init__(self, seconds: float, what: str):
        self.message = f"{what} exceeded its {seconds:g} s deadline (hang?)"
        self.expired = threading.Event()
        self.done = threading.Event()
        self.stuck_stack = ""
        self.interrupting = False  # set just before the hard stop's signal: the handler raises only then
        self.lock = threading.Lock()  # the hard stop and the end of the model work exclude each other


@contextlib.contextmanager
def deadline(seconds: float | None, what: str = "check", grace: float = 2.0, kill_after: float | None = None):
    if not seconds or seconds <= 0:
        yield
        return
    kill_after = KILL_AFTER if kill_after is None else kill_after
    target = threading.get_ident()
    outer = sys._getframe(2)  # the `with deadline(...)` line (frames: this generator, contextlib's __enter__)
    in_main = threading.current_thread() is threading.main_thread()
    dl = _Deadline(seconds, what)
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(dl)
    outermost = len(stack) == 1

    previous = None
    if in_main:

        def on_signal(signum, frame):
            if dl.interrupting:
                dl.interrupting = False
                raise CheckTimeout(dl.message, dl.stuck_stack)
            if callable(previous):
                previous(signum, frame)

        previous = signal.signal(SIGNAL, on_signal)

    def watchdog():
        if dl.done.wait(seconds):
            return
        dl.expired.set()  # soft stop: the harness raises at its next model call
        if dl.done.wait(grace):
            return
        with dl.lock:
            if dl.done.is_set():
                return
            dl.stuck_stack = _stack_of(target, outer)  # hard stop: the model is stuck inside one call
            if in_main:
                dl.interrupting = True
                signal.pthread_kill(target, SIGNAL)
            else:
                exc = type(
                    "CheckTimeout", (CheckTimeout,), {"__init__": lambda s: CheckTimeout.__init__(s, dl.message)}
                )
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(exc))

    armed = False
    target_file = _dump_target()
    if outermost and kill_after > 0 and target_file is not None:
        try:
            faulthandler.dump_traceback_later(seconds + grace + kill_after, exit=True, file=target_file)
            armed = True
        except (ValueError, RuntimeError, OSError, AttributeError):  # no usable stderr: no last resort
            pass
    t = threading.Thread(target=watchdog, name=f"omnitts-deadline-{what}", daemon=True)
    t.start()
    try:
        yield
    except CheckTimeout as exc:
        if not exc.stack and dl.stuck_stack:
            exc.stack = dl.stuck_stack
        raise
    finally:
        with dl.lock:
            dl.done.set()
            dl.interrupting = False  # a signal still pending from a hard stop that lost the race does nothing
        t.join()
        if armed:
            faulthandler.cancel_dump_traceback_later()
        stack.remove(dl)
        if in_main:
            signal.signal(SIGNAL, previous if previous is not None else signal.SIG_DFL)
        elif dl.stuck_stack:
            # the async exception may still be pending if it fired during this cleanup: clear it
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), None)
