"""The one error type the scaffold raises for bad input: printed as one line, exit code 2."""


class ScaffoldError(Exception):
    """A user-facing refusal. The message is one line and names what was found."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
