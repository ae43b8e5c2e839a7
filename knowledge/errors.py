"""The one error type for bad input about a tree or a release: printed as one line, exit code 2.

`omnitts.scaffold.errors.ScaffoldError` is this class, so the scaffold's command line reports the
knowledge layer's refusals (not a vLLM-Omni tree, an unsupported era, a bad release spec) as its own.
"""


class TreeError(Exception):
    """A user-facing refusal. The message is one line and names what was found."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
