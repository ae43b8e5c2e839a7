"""A backend observes a model (or a server) and hands typed observations to the verdicts; it never judges.

A backend class marks each method that makes one kind of observation with ``@observes(Kind)``; :meth:`Backend.runs`
says whether it can give every observation a check's verdict needs, and :meth:`Backend.missing` which ones it cannot
(the reason a tier does not run the check). :func:`judge` is the one way a check runs: observe what its verdict
needs, then the verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from omnitts.validators.verdicts import VERDICTS, Verdict


def observes(kind: type):
    """Marks the decorated method as this backend's way to observe ``kind``."""

    def mark(fn):
        fn.observes = kind
        return fn

    return mark


class Backend:
    name: ClassVar[str] = ""
    title: ClassVar[str] = ""  # what a person calls it ("the offline engine")
    observers: ClassVar[dict[type, Callable]] = {}
    source_device: str = "cpu"

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        table: dict[type, Callable] = {}
        for klass in reversed(cls.__mro__):
            for value in vars(klass).values():
                if hasattr(value, "observes"):
                    table[value.observes] = value
        cls.observers = table

    @classmethod
    def missing(cls, check: str) -> list[type]:
        """The observations ``check``'s verdict needs that this backend cannot make."""
        return [kind for kind in VERDICTS[check].needs if kind not in cls.observers]

    @classmethod
    def runs(cls, check: str) -> bool:
        return check in VERDICTS and not cls.missing(check)

    @property
    def observed(self) -> dict[type, object]:
        """The last observation of each kind this backend made."""
        return self.__dict__.setdefault("_observed", {})

    def observe(self, kind: type):
        method = self.observers.get(kind)
        if method is None:
            raise LookupError(f"{self.title or self.name} cannot observe {kind.__name__}")
        self.observed[kind] = found = method(self)
        return found


def judge(backend: Backend, check: str) -> Verdict:
    """``check`` on ``backend``: the observations its verdict needs, then its verdict."""
    verdict = VERDICTS[check]
    return verdict({kind: backend.observe(kind) for kind in verdict.needs})
