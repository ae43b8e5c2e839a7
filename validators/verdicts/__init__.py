"""One verdict per check id: a pure function from typed observations to pass / fail / not applicable with its
diagnosis (the request, the first differing sample, replay or truncation, crosstalk, the audio to listen to).

Every backend (harness, offline engine, server, URL) hands its observations to the same verdict, so a check fails
the same way wherever it runs. :data:`VERDICTS` maps each check id to its :class:`~.base.Judge`.
"""

from omnitts.validators.verdicts import (  # noqa: F401  (registers them)
    audio,
    chunk,
    i1,
    i3,
    i4,
    i5,
    model,
    parity,
    perf,
    server,
)
from omnitts.validators.verdicts.base import VERDICTS, Judge, Verdict

__all__ = ["VERDICTS", "Judge", "Verdict"]
