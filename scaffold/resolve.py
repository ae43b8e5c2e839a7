"""`omnitts-scaffold resolve`: merge the shared files two model integrations touched, keeping both sides.

Two branches that each add a model add lines at the same anchors of the same shared files (the end
of `_OMNI_MODELS`, the union of stage constants, the import tuple of `tts_adapters/__init__.py`, the
hub README table...), so git reports conflicts whose common ancestor is empty on both sides. The
guide's rebase note says: keep both sides. `resolve` does exactly that, per conflict:

* both sides only added lines there (empty ancestor), otherwise it gives up and the file keeps
  git's conflict markers;
* sorted blocks stay sorted: names of an import tuple, `from ... import` statements (isort order),
  hub table rows and `---`-separated hub sections (alphabetical) are merged in order; any other
  additions (dict entries, stage constants, `if` branches, methods) are kept ours-then-theirs;
* the result must parse (Python) and hold every line either side added.

As a git merge driver (`resolve --install` sets it up in `.git/config` and `.git/info/attributes`,
so no tracked file changes): `omnitts-scaffold resolve %O %A %B --path %P`. Without file arguments
it resolves every conflicted shared file of a stopped merge or rebase from the index stages.
"""

from __future__ import annotations

import ast
import re
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from omnitts.knowledge import layout
from omnitts.scaffold.codemods.slices import natural_key
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.plan import line_ending, read_text

SHARED_FILES = (
    layout.REGISTRY,
    layout.PIPELINE_REGISTRY,
    layout.HF_CONFIGS,
    layout.SERVING,
    layout.ADAPTERS_INIT,
    layout.OFFLINE_HUB,
    layout.ONLINE_HUB,
)
DRIVER = "omnitts"

_OURS, _BASE, _SEP, _THEIRS = "<<<<<<< ", "||||||| ", "=======", ">>>>>>> "
_TUPLE_NAME = re.compile(r"^\s+[A-Za-z_][A-Za-z0-9_]*,\s*$")


def _git_merge_file(ours: str, base: str, theirs: str) -> str:
    with tempfile.TemporaryDirectory(prefix="omnitts-resolve-") as tmp:
        paths = []
        for label, text in (("ours", ours), ("base", base), ("theirs", theirs)):
            path = Path(tmp) / label
            path.write_text(text, encoding="utf-8")
            paths.append(str(path))
        proc = subprocess.run(
            ["git", "merge-file", "-p", "--diff3", "-L", "ours", "-L", "base", "-L", "theirs", *paths],
            capture_output=True,
            text=True,
        )
        if proc.returncode < 0 or proc.returncode > 127:
            raise ScaffoldError(f"git merge-file failed: {proc.stderr.strip()}")
        return proc.stdout


def _units(lines: list[str], kind: str) -> list[list[str]]:
    """Split a block into the units that are sorted (one statement, one row, one section)."""
    if kind == "section":
        units: list[list[str]] = []
        for line in lines:
            if line.rstrip("\n") == "---" or not units:
                units.append([])
            units[-1].append(line)
        return units
    if kind == "import":
        units = []
        depth = 0
        for line in lines:
            if depth == 0:
                units.append([])
            units[-1].append(line)
            depth += line.count("(") - line.count(")")
        return units
    return [[line] for line in lines]


def _kind(lines: list[str]) -> str | None:
    stripped = [line.rstrip("\n") for line in lines]
    if all(_TUPLE_NAME.match(s) for s in stripped):
        return "name"
    if all(s.startswith("|") for s in stripped):
        return "row"
    if stripped and stripped[0] == "---" and any(s.startswith("## ") for s in stripped):
        return "section"
    units = _units(lines, "import")
    if units and all(u[0].lstrip().startswith("from ") and " import " in u[0] for u in units):
        return "import"
    return None


def _key(unit: list[str], kind: str):
    first = unit[0].strip()
    if kind == "name":
        return natural_key(first.rstrip(","))
    if kind == "row":
        return first.strip("|").split("|")[0].strip().lower()
    if kind == "section":
        heading = next((line for line in unit if line.startswith("## ")), "")
        return heading[3:].strip().lower()
    return natural_key(first.split()[1])  # `from <module> import ...`


def _combine(ours: list[str], theirs: list[str]) -> list[str]:
    kind = _kind(ours) if ours else None
    if kind is not None and theirs and _kind(theirs) == kind:
        units = _units(ours, kind) + _units(theirs, kind)
        return [line for unit in sorted(units, key=lambda u: _key(u, kind)) for line in unit]
    return ours + theirs


def merge_texts(base: str, ours: str, theirs: str, path: str = "") -> tuple[str, int]:
    """(merged text, unresolved conflicts): keep both sides' additions at every conflict."""
    merged = _git_merge_file(ours, base, theirs)
    out: list[str] = []
    unresolved = 0
    lines = merged.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith(_OURS):
            out.append(line)
            i += 1
            continue
        sections: dict[str, list[str]] = {"ours": [], "base": [], "theirs": []}
        part = "ours"
        raw = [line]
        i += 1
        while i < len(lines) and not lines[i].startswith(_THEIRS):
            current = lines[i]
            raw.append(current)
            if current.startswith(_BASE):
                part = "base"
            elif current.rstrip("\n") == _SEP:
                part = "theirs"
            else:
                sections[part].append(current)
            i += 1
        if i < len(lines):
            raw.append(lines[i])
            i += 1
        if sections["base"]:
            unresolved += 1
            out += raw  # both sides changed existing lines: not an additions-only conflict
        else:
            out += _combine(sections["ours"], sections["theirs"])
    text = "".join(out)
    if unresolved == 0:
        _verify(base, ours, theirs, text, path)
    return text, unresolved


def _verify(base: str, ours: str, theirs: str, merged: str, path: str) -> None:
    if path.endswith(".py"):
        try:
            ast.parse(merged)
        except SyntaxError as exc:
            raise ScaffoldError(f"{path}: keeping both sides does not parse ({exc.msg} at line {exc.lineno})") from exc
    have = Counter(merged.splitlines())
    base_lines = Counter(base.splitlines())
    for side, text in (("ours", ours), ("theirs", theirs)):
        added = Counter(text.splitlines()) - base_lines
        lost = added - have
        if lost:
            raise ScaffoldError(f"{path}: the merge lost lines {side} added (e.g. {next(iter(lost))!r})")


def merge_keeping_line_endings(base: str, ours: str, theirs: str, path: str = "") -> tuple[str, int]:
    """`merge_texts` on `\\n` text; the merge gets the line ending of `ours`, the file it is written into."""
    crlf = line_ending(ours, path) == "\r\n"
    merged, unresolved = merge_texts(*(t.replace("\r\n", "\n") for t in (base, ours, theirs)), path)
    return (merged.replace("\n", "\r\n") if crlf else merged), unresolved


def _read(path: Path) -> str:
    try:
        return read_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ScaffoldError(f"cannot read {path}: {why or exc}") from exc


def _write(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def resolve_files(base: Path, ours: Path, theirs: Path, path: str = "") -> int:
    """Merge-driver mode: write the merge into `ours`; 0 when clean, 1 when conflicts remain."""
    texts = [_read(p) for p in (base, ours, theirs)]
    merged, unresolved = merge_keeping_line_endings(texts[0], texts[1], texts[2], path or str(ours))
    _write(ours, merged)
    return 1 if unresolved else 0


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise ScaffoldError(f"git {' '.join(args[:2])} failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")
    return proc


def resolve_repo(root: Path) -> list[tuple[str, str]]:
    """Resolve every conflicted shared file of a stopped merge / rebase; returns [(path, outcome)]."""
    if _git(root, "rev-parse", "--is-inside-work-tree", check=False).returncode != 0:
        raise ScaffoldError(f"{root} is not a git working tree")
    unmerged = sorted(
        {line.split("\t", 1)[1] for line in _git(root, "ls-files", "-u").stdout.splitlines() if "\t" in line}
    )
    if not unmerged:
        return []
    results = []
    for rel in unmerged:
        if rel not in SHARED_FILES:
            results.append((rel, "not a shared file omnitts patches; left to you"))
            continue
        stages = {}
        for n in (1, 2, 3):  # as bytes: text mode would turn \r\n into \n
            proc = subprocess.run(["git", "-C", str(root), "show", f":{n}:{rel}"], capture_output=True)
            stages[n] = proc.stdout.decode("utf-8", errors="replace") if proc.returncode == 0 else ""
        merged, unresolved = merge_keeping_line_endings(stages[1], stages[2], stages[3], rel)
        if unresolved:
            results.append((rel, f"{unresolved} conflict(s) changed existing lines on both sides; left with markers"))
            continue
        _write(root / rel, merged)
        _git(root, "add", "--", rel)
        results.append((rel, "resolved (both sides kept)"))
    return results


def install_driver(root: Path, command: str = "omnitts-scaffold") -> list[str]:
    """Register the merge driver in .git/config and route the shared files to it in .git/info/attributes."""
    if _git(root, "rev-parse", "--is-inside-work-tree", check=False).returncode != 0:
        raise ScaffoldError(f"{root} is not a git working tree")
    _git(root, "config", f"merge.{DRIVER}.name", "omnitts-scaffold: keep both models' additions in shared files")
    _git(root, "config", f"merge.{DRIVER}.driver", f"{command} resolve %O %A %B --path %P")
    git_dir = Path(_git(root, "rev-parse", "--git-common-dir").stdout.strip())
    if not git_dir.is_absolute():
        git_dir = root / git_dir
    attributes = git_dir / "info" / "attributes"
    attributes.parent.mkdir(parents=True, exist_ok=True)
    existing = attributes.read_text(encoding="utf-8") if attributes.is_file() else ""
    wanted = [f"{rel} merge={DRIVER}" for rel in SHARED_FILES]
    missing = [line for line in wanted if line not in existing.splitlines()]
    if missing:
        prefix = existing if not existing or existing.endswith("\n") else existing + "\n"
        attributes.write_text(prefix + "\n".join(missing) + "\n", encoding="utf-8")
    return wanted
