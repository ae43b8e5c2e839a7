"""The one error type the scaffold raises for bad input: printed as one line, exit code 2.

It is the knowledge layer's `TreeError`, so refusals raised there (era detection, release specs) are the
scaffold's refusals too."""

from omnitts.knowledge.errors import TreeError as ScaffoldError

__all__ = ["ScaffoldError"]
