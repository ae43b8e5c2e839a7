"""Baseline (ratchet) file: existing findings a tree adopts the hook with, one entry per fingerprint.

An entry is ``{path, rule, symbol, hash, count, reason}`` — no line numbers, so moving code keeps it
valid. Comparing a run with the baseline:
- findings beyond an entry's count (or with no entry) are new: the run fails;
- an entry with fewer current findings than its count is fixed (partly): a notice asks to shrink it;
- in a full scan, an entry with no current finding (or whose file is gone) is stale: the run fails;
  in a partial scan (pre-commit on changed files) entries of files not scanned are ignored.
Only entries the run could have reported are judged (``Coverage``): a per-file rule's entry when its
file was linted, a tree rule's entry when the tree rules ran with the file in focus, and only for rules
selected. So one baseline serves both hooks: the per-file hook never calls the integration entries
stale, and the integration hook (`--integration`, `--changed`) never calls the per-file entries stale.
The baseline is written only on request (``--write-baseline``) with a reason; CI never regenerates it;
``--shrink-baseline`` lowers counts to what the run found and drops fixed entries (never adds any).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from omnitts.validators.static.finding import Finding

VERSION = 1
DEFAULT_NAME = ".omnitts-lint-baseline.json"


class BaselineError(ValueError):
    pass


@dataclass
class Entry:
    path: str
    rule: str
    symbol: str
    hash: str
    count: int
    reason: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.path, self.rule, self.symbol, self.hash)


@dataclass
class Outcome:
    new: list[Finding] = field(default_factory=list)
    baselined: int = 0
    notices: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # errors in a full scan
    used: Counter = field(default_factory=Counter)  # findings each judged entry accepted
    judged: list[Entry] = field(default_factory=list)  # entries the run covered


@dataclass(frozen=True)
class Coverage:
    """What one lint run judged: the files the per-file rules read (absolute; None: no per-file rule
    ran), the tree the tree-scope rules ran on (None: they did not run) and their focus (None: the
    whole tree), and the rule selection (None: every rule)."""

    files: frozenset[Path] | None
    tree_root: Path | None
    tree_focus: frozenset[str] | None
    select: list[str] | None = None

    def covers(self, entry: Entry, base: Path) -> bool:
        from omnitts.validators.static import linter

        rule = linter.all_rules().get(entry.rule)
        if rule is None:
            return True  # an unknown rule id: judged (and reported stale) rather than kept silently
        if self.select is not None and entry.rule not in {r.id for r in linter.select_rules(self.select)}:
            return False
        path = Path(os.path.abspath(base / entry.path))
        if rule.scope == "tree":
            if self.tree_root is None:
                return False
            try:
                rel = path.relative_to(self.tree_root).as_posix()
            except ValueError:
                return False
            return self.tree_focus is None or rel in self.tree_focus
        return self.files is not None and path in self.files


def _rel(path: str, base: Path) -> str:
    p = Path(path)
    absp = p if p.is_absolute() else Path.cwd() / p
    try:
        return Path(os.path.relpath(absp.resolve(), base.resolve())).as_posix()
    except ValueError:
        return absp.as_posix()


def load(path: Path) -> list[Entry]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BaselineError(f"baseline {path} does not exist") from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise BaselineError(f"baseline {path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("entries"), list):
        raise BaselineError(f"baseline {path}: expected {{'version': {VERSION}, 'entries': [...]}}")
    out = []
    for i, e in enumerate(data["entries"]):
        try:
            entry = Entry(
                str(e["path"]), str(e["rule"]), str(e["symbol"]), str(e["hash"]), int(e["count"]), str(e["reason"])
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BaselineError(f"baseline {path}: entry {i} is malformed ({exc})") from exc
        if not entry.reason.strip():
            raise BaselineError(f"baseline {path}: entry {i} ({entry.rule} in {entry.path}) has no reason")
        if entry.count < 1:
            raise BaselineError(f"baseline {path}: entry {i} has count {entry.count}")
        out.append(entry)
    return out


def entries_for(findings: list[Finding], base: Path, reason: str) -> list[Entry]:
    counts = Counter(
        (_rel(f.path, base), f.rule, f.symbol, f.stmt_hash) for f in findings if not f.rule.startswith("OMNI-META")
    )
    return [Entry(p, r, s, h, n, reason) for (p, r, s, h), n in sorted(counts.items())]


def write(path: Path, findings: list[Finding], reason: str) -> int:
    if not reason.strip():
        raise BaselineError("--write-baseline needs --reason: every entry must say why it is accepted")
    entries = entries_for(findings, path.parent, reason)
    data = {"version": VERSION, "entries": [e.__dict__ for e in entries]}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return len(entries)


def compare(
    findings: list[Finding],
    entries: list[Entry],
    base: Path,
    scanned: set[str] | None,
    full: bool,
    coverage: Coverage | None = None,
) -> Outcome:
    """``scanned``: relative paths (to ``base``) the run covered; None = everything. ``coverage``, when
    given, narrows the entries judged to those the run could have reported."""
    out = Outcome()
    budget = {e.key: e for e in entries}
    used: Counter = Counter()
    for f in findings:
        if f.rule.startswith("OMNI-META"):
            out.new.append(f)  # parse errors, suppression problems and crashes are never baselined
            continue
        key = (_rel(f.path, base), f.rule, f.symbol, f.stmt_hash)
        e = budget.get(key)
        if e is not None and used[key] < e.count:
            used[key] += 1
            out.baselined += 1
        else:
            out.new.append(f)
    out.used = used
    for e in entries:
        if scanned is not None and e.path not in scanned:
            continue
        if coverage is not None and not coverage.covers(e, base):
            continue
        out.judged.append(e)
        n = used[e.key]
        if n == 0 and (full or not (base / e.path).exists()):
            out.stale.append(f"stale baseline entry: {e.rule} in {e.path} ({e.symbol}) no longer reported; remove it")
        elif n < e.count:
            out.notices.append(
                f"baseline entry {e.rule} in {e.path} ({e.symbol}) allows {e.count}, found {n}: "
                "lower its count (the ratchet only goes down)"
            )
    return out


def shrink(path: Path, entries: list[Entry], outcome: Outcome) -> tuple[int, int]:
    """Lower each judged entry's count to the findings it accepted in this run; drop entries that accept
    none. Entries the run did not judge are kept as they are. Returns (entries lowered, entries dropped)."""
    judged = {id(e) for e in outcome.judged}
    kept, lowered, dropped = [], 0, 0
    for e in entries:
        if id(e) in judged and outcome.used[e.key] < e.count:
            if outcome.used[e.key] == 0:
                dropped += 1
                continue
            e = Entry(e.path, e.rule, e.symbol, e.hash, outcome.used[e.key], e.reason)
            lowered += 1
        kept.append(e)
    data = {"version": VERSION, "entries": [e.__dict__ for e in kept]}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return lowered, dropped


def find_default(start: Path) -> Path | None:
    for cand in [start, *start.parents]:
        f = cand / DEFAULT_NAME
        if f.is_file():
            return f
    return None
