"""Scheduling: request ids, one request's progress, and vLLM's persistent batch order."""

from __future__ import annotations

import hashlib


def sched_id(ext_id: str, stage: int, salt: str) -> str:
    """The stage's scheduler id of an external request (distinct per stage, like the release's ids)."""
    h = hashlib.sha1(f"{ext_id}/{stage}/{salt}".encode()).hexdigest()[:8]
    return f"{ext_id}-{h}"


class Req:
    __slots__ = (
        "rid",
        "ext",
        "prompt",
        "out",
        "computed",
        "max_tokens",
        "finished",
        "aborted",
        "info",
        "n_chunks",
        "seed",
    )

    def __init__(self, rid, ext, prompt, max_tokens, info, seed=None):
        self.rid, self.ext, self.prompt, self.max_tokens = rid, ext, list(prompt), max_tokens
        self.out: list[int] = []
        self.computed = 0
        self.finished = False
        self.aborted = False
        self.info = info
        self.n_chunks = 0
        self.seed = seed

    def is_finished(self) -> bool:
        return self.finished


class Slots:
    """vLLM's persistent batch: removed slots are reused by new requests, then holes are filled from the end."""

    def __init__(self):
        self.slots: list[str | None] = []

    def remove(self, rid: str) -> None:
        for i, r in enumerate(self.slots):
            if r == rid:
                self.slots[i] = None

    def add(self, rid: str) -> None:
        for i, r in enumerate(self.slots):
            if r is None:
                self.slots[i] = rid
                return
        self.slots.append(rid)

    def condense(self) -> None:
        while self.slots and self.slots[-1] is None:
            self.slots.pop()
        while None in self.slots:
            hole = self.slots.index(None)
            self.slots[hole] = self.slots.pop()
            while self.slots and self.slots[-1] is None:
                self.slots.pop()

    def order(self) -> list[str]:
        return [r for r in self.slots if r is not None]
