"""META — findings about the lint run itself. The engine raises them (parse errors, suppression
bookkeeping, internal errors); the classes carry their documentation and executable cases."""

from __future__ import annotations

from omnitts.validators.static.rule import CODE, CONFIG, CONSUMER, MODEL, Invalid, Rule, Valid, register

_ALL = frozenset({MODEL, CONSUMER, CODE, CONFIG})
_HOT = """
import torch


class M(torch.nn.Module):
    def forward(self, x: torch.Tensor):
        out = []
        for i in range(4):
{line}
        return out
"""


class _Meta(Rule):
    invariant = "META"
    severity = "error"
    kinds = _ALL


@register
class ParseError(_Meta):
    """A file that does not parse (syntax error, null bytes, bad encoding).

    Why: no rule can check it, so passing it silently would be a hole in the gate (fail closed).

    Fix: fix the syntax; if the file is not Python meant for this target, exclude it from the paths.
    """

    id = "OMNI-META-001"
    name = "parse-error"
    VALID = [Valid("x = 1\n")]
    INVALID = [Invalid("def broken(:\n    pass\n", line=1, message="does not parse")]


@register
class SuppressionWithoutReason(_Meta):
    """A suppression comment without a reason, without a rule id, or malformed.

    Why: a suppression is a reviewed exception; without the reason nobody can tell later whether it
    still holds. A reason-less suppression suppresses nothing.

    Fix: `# omnitts: ignore[OMNI-I3-001] one batched read per step, measured` on the line or the
    line above.
    """

    id = "OMNI-META-002"
    name = "suppression-without-reason"
    VALID = [
        Valid(
            _HOT.format(
                line="            out.append(x[i].item())  # omnitts: ignore[OMNI-I3-001] x lives on the host here"
            )
        )
    ]
    INVALID = [
        Invalid(
            _HOT.format(line="            out.append(x[i].item())  # omnitts: ignore[OMNI-I3-001]"),
            line=9,
            message="no reason",
        )
    ]


@register
class UnusedSuppression(_Meta):
    """A suppression that suppresses nothing (the rule reports nothing there any more) or names an
    unknown rule.

    Why: stale suppressions hide future findings on that line and mislead readers; a typo in a rule
    id suppresses nothing while looking like it does.

    Fix: delete the comment, or correct the rule id.
    """

    id = "OMNI-META-003"
    name = "unused-suppression"
    VALID = [Valid(_HOT.format(line="            out.append(x[i] * 2)"))]
    INVALID = [
        Invalid(
            _HOT.format(line="            out.append(x[i] * 2)  # omnitts: ignore[OMNI-I3-001] fast enough"),
            line=9,
            message="unused suppression",
        )
    ]


@register
class InternalError(_Meta):
    """A rule crashed on a file, or a file could not be read.

    Why: the file was not fully checked; the run fails closed instead of passing silently.

    Fix: report the message (rule, exception, location) as a bug; meanwhile exclude the file
    explicitly if it must pass.
    """

    id = "OMNI-META-004"
    name = "internal-error"
    VALID = [Valid("x = 1\n")]
    INVALID = [
        Invalid("import os\n", line=1, message="internal error", note="raised by a crashing rule the test injects")
    ]
