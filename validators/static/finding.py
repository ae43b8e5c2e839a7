"""The one record every rule, suppression check and baseline comparison exchanges."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

SEVERITIES = ("error", "warning")


@dataclass(frozen=True)
class Finding:
    """One violation at one place.

    ``symbol`` (enclosing ``Class.method``) and ``stmt_hash`` (hash of the normalized statement) make
    the line-number-free fingerprint the baseline uses, so moving code keeps a baseline entry valid.
    """

    path: str
    line: int
    col: int
    rule: str
    invariant: str
    severity: str
    message: str
    symbol: str = "<module>"
    stmt_hash: str = ""
    fix: str | None = field(default=None, compare=False)  # replacement text of the statement, when safe

    @property
    def fingerprint(self) -> tuple[str, str, str, str]:
        return (self.path, self.rule, self.symbol, self.stmt_hash)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["fixable"] = data.pop("fix") is not None
        return data

    def sort_key(self) -> tuple:
        return (self.path, self.line, self.col, self.rule, self.message)
