"""How a run ends badly: the model raised, the model broke the runner's contract, or a check stopped the run."""

from __future__ import annotations

import traceback


class ModelError(Exception):
    """The model raised inside one of its contract methods; carries the model's own traceback."""

    def __init__(self, where: str, exc: BaseException):
        self.where = where
        self.original = exc
        self.tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        super().__init__(f"{where} raised {type(exc).__name__}: {exc}")


class StopRun(Exception):
    """Raised by an intercept to end a run early (e.g. after torch._dynamo.explain ran one step)."""


class ContractError(AssertionError):
    """The model broke the forward contract in a way the release's runner would reject or mishandle."""


PASS = object()  # an intercept returns this to let the call through
