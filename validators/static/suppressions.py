"""``# omnitts: ignore[RULE-ID, ...] reason`` comments.

A suppression covers its own line and, when the comment stands alone on its line, the next one.
The reason is mandatory: a reason-less suppression suppresses nothing and is itself a finding
(OMNI-META-002); so is one that suppresses nothing or names an unknown rule (OMNI-META-003).
"""

from __future__ import annotations

import hashlib
import io
import re
import tokenize
from dataclasses import dataclass

from omnitts.validators.static.finding import Finding

MARK = "omnitts:"
_RE = re.compile(r"#\s*omnitts:\s*ignore\[([^\]]*)\]\s*(.*)$")
_LOOSE = re.compile(r"#\s*omnitts:\s*ignore\b")


@dataclass
class Suppression:
    line: int
    col: int
    rules: tuple[str, ...]
    reason: str
    standalone: bool
    used: set[str]

    def covers(self, line: int) -> bool:
        return line == self.line or (self.standalone and line == self.line + 1)


def _comments(text: str, python: bool) -> list[tuple[int, int, str, bool]]:
    """(line, col, comment text, standalone) for comments mentioning the marker."""
    out = []
    if python:
        try:
            for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                if tok.type == tokenize.COMMENT and MARK in tok.string:
                    standalone = not tok.line[: tok.start[1]].strip()
                    out.append((tok.start[0], tok.start[1] + 1, tok.string, standalone))
            return out
        except (tokenize.TokenError, SyntaxError, IndentationError):
            out = []
    for i, line in enumerate(text.splitlines(), 1):
        pos = line.find("#")
        while pos != -1:
            if MARK in line[pos:]:
                out.append((i, pos + 1, line[pos:], not line[:pos].strip()))
                break
            pos = line.find("#", pos + 1)
    return out


def parse(text: str, python: bool = True) -> tuple[list[Suppression], list[tuple[int, int, str]]]:
    """Suppressions, and malformed markers as (line, col, problem)."""
    if MARK not in text:
        return [], []
    sups, bad = [], []
    for line, col, comment, standalone in _comments(text, python):
        m = _RE.search(comment)
        if not m:
            if _LOOSE.search(comment):
                bad.append((line, col, "malformed suppression; write `# omnitts: ignore[RULE-ID] reason`"))
            continue
        rules = tuple(r.strip() for r in m.group(1).split(",") if r.strip())
        sups.append(Suppression(line, col, rules, m.group(2).strip(), standalone, set()))
    return sups, bad


def apply(
    path: str, text: str, findings: list[Finding], ran: set[str], known: set[str], python: bool = True
) -> list[Finding]:
    """Drop suppressed findings; add META findings for reason-less, unknown and unused suppressions."""
    sups, bad = parse(text, python)
    meta = []
    for line, col, problem in bad:
        meta.append(_meta(path, line, col, "OMNI-META-002", problem))
    if not sups:
        return findings + meta
    kept = []
    by_line: dict[int, list[Suppression]] = {}  # a line's candidates, in comment order (no O(F x S) scan)
    for s in sorted(sups, key=lambda s: (s.line, s.col)):
        by_line.setdefault(s.line, []).append(s)
        if s.standalone:
            by_line.setdefault(s.line + 1, []).append(s)
    for f in findings:
        sup = next((s for s in by_line.get(f.line, ()) if f.rule in s.rules and s.reason), None)
        if sup is None:
            kept.append(f)
        else:
            sup.used.add(f.rule)
    for s in sups:
        if not s.rules:
            meta.append(_meta(path, s.line, s.col, "OMNI-META-002", "suppression names no rule"))
            continue
        if not s.reason:
            meta.append(
                _meta(
                    path,
                    s.line,
                    s.col,
                    "OMNI-META-002",
                    f"suppression of {', '.join(s.rules)} has no reason; it suppresses nothing until one is given",
                )
            )
            continue
        for r in s.rules:
            if r not in known:
                meta.append(_meta(path, s.line, s.col, "OMNI-META-003", f"suppression names unknown rule {r}"))
            elif r in ran and r not in s.used:
                meta.append(
                    _meta(path, s.line, s.col, "OMNI-META-003", f"unused suppression: {r} reports nothing here")
                )
    return kept + meta


def _meta(path: str, line: int, col: int, rule: str, message: str) -> Finding:
    digest = hashlib.blake2b(f"{rule}:{message}".encode(), digest_size=6).hexdigest()
    return Finding(path, line, col, rule, "META", "error", message, "<module>", digest)
