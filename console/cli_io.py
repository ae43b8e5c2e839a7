"""Command-line manners shared by the omnitts console scripts (omnitts-lint, omnitts-scaffold,
omnitts-validate): a reader that closes the pipe early (`omnitts-lint --list-rules | head`) ends the
output quietly, without a traceback and without turning into an "internal error" exit."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable

# What a process killed by SIGPIPE reports in a shell (128 + 13); Python ignores SIGPIPE, so a closed
# pipe surfaces as BrokenPipeError instead and is mapped back to the conventional status.
EXIT_CLOSED_PIPE = 141


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout already closed or replaced (tests)
        pass


def emit(text: str) -> bool:
    """Write to stdout; False (and stdout silenced) when the reader has gone away. The caller goes on
    and returns its own exit code: a lint with findings still exits 1 when its reader stops early."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
        return True
    except BrokenPipeError:
        silence_stdout()
        return False


def quiet_on_closed_pipe(main: Callable[..., int]) -> Callable[..., int]:
    """Decorator for a console-script ``main``: stdout is flushed before returning (so a closed pipe
    shows up here, not in the interpreter's shutdown), and a BrokenPipeError ends the command with
    ``EXIT_CLOSED_PIPE`` and nothing on stderr. A command that finished keeps its own exit code."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            code = main(*args, **kwargs)
        except BrokenPipeError:
            silence_stdout()
            return EXIT_CLOSED_PIPE
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            silence_stdout()
        except (OSError, ValueError, AttributeError):
            pass
        return code

    return wrapper


__all__ = ["EXIT_CLOSED_PIPE", "emit", "quiet_on_closed_pipe", "silence_stdout"]
