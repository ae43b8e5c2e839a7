"""Runs rules over files: discovery, parse once per file, per-file rules, suppressions, content-hash
cache, worker processes, then the tree-scope rules. Anything that goes wrong inside is reported as
a finding or an error, never swallowed (fail closed)."""

from __future__ import annotations

import ast
import gc
import hashlib
import io
import os
import re
import stat
import sys
import threading
import tokenize
import traceback
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from omnitts.knowledge.treefacts import TreeContext, TreeFacts
from omnitts.validators.static import suppressions
from omnitts.validators.static.finding import Finding
from omnitts.validators.static.rule import CONFIG, REGISTRY, Report, Rule
from omnitts.validators.static.source import SourceFile

SKIP_DIRS = {
    ".git",
    "__pycache__",
    ".venv",
    "venv",
    "node_modules",
    "build",
    "dist",
    ".cache",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".eggs",
}
CONFIG_DIRS = {"deploy", "stage_configs"}
PARALLEL_MIN_BYTES = 1_500_000  # below this, worker start-up costs more than it saves
# The most of one file the linter reads. A source file costs about three times its size while it is
# decoded and parsed (a 1 GB file took 3.2 GB); the largest module of any vLLM-Omni release is ~200 KB
# and the largest .py of a whole Python environment a few MB, so a bigger file is a generated data file
# or a mistake: it is not read, and a finding names it (never a silent pass).
MAX_SOURCE_BYTES = 16 * 2**20


class UsageError(Exception):
    """Bad arguments or missing input: exit code 2."""


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # internal errors: the run fails closed
    files: int = 0
    cached: int = 0
    missing: list[str] = field(default_factory=list)  # paths that do not exist (with keep_going)
    rules: int = 0  # rules selected for the run (remembered in the cache for warm runs)
    tree_ran: bool = False  # the tree-scope rules ran (or came from the cache)
    coverage: object = None  # baseline.Coverage: what the run judged (set by api.run; the baseline's stale check)


# --- rule selection -------------------------------------------------------------------------------
def all_rules() -> dict[str, type[Rule]]:
    import omnitts.validators.static.rules  # noqa: F401  (registers every rule)

    return REGISTRY


def select_rules(select: Iterable[str] | None) -> list[type[Rule]]:
    """``select`` holds rule ids, id prefixes (``OMNI-I3``) or invariants (``I3``, ``INT``)."""
    rules = all_rules()
    if not select:
        return [rules[k] for k in sorted(rules)]
    chosen = set()
    for item in select:
        item = item.strip()
        if not item:
            continue
        hits = {
            k
            for k, r in rules.items()
            if k == item
            or k.startswith(item + "-")
            or k.startswith(item)
            and item.count("-") >= 2
            or r.invariant == item
        }
        if not hits:
            raise UsageError(f"--select {item!r} matches no rule (see --list-rules)")
        chosen |= hits
    # Suppression bookkeeping always runs: a stale or reason-less suppression is a finding.
    chosen |= {k for k in rules if k.startswith("OMNI-META")}
    return [rules[k] for k in sorted(chosen)]


def rules_version() -> str:
    """Hash of the validator sources: a code change invalidates the cache."""
    h = hashlib.blake2b(digest_size=8)
    base = Path(__file__).parent
    for p in sorted(base.rglob("*.py")):
        h.update(p.relative_to(base).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


# --- discovery ------------------------------------------------------------------------------------
def discover(paths: Iterable[Path], missing: list[str] | None = None) -> list[str]:
    """Python files (and stage/deploy YAMLs) under the paths, as given-relative strings (plain
    os.path here: a warm run spends most of its time walking and reading).

    Special entries are kept, not dropped: a dangling symlink, a FIFO or an unreadable file named
    ``*.py`` becomes a file the run reports as unreadable (never a silent pass, never a hang). A path
    that does not exist raises UsageError, or is appended to ``missing`` when a list is given (the
    CLI then lints the rest and exits 2)."""
    out: list[str] = []
    seen: set[str] = set()
    for p in paths:
        p = os.fspath(p)
        if not os.path.lexists(p):
            if missing is None:
                raise UsageError(f"no such file or directory: {p}")
            missing.append(p)
            continue
        if os.path.isdir(p):
            cands: list[str] = []
            # A directory that cannot be listed is kept as an input: reading it fails with its reason
            # (os.walk would skip it silently).
            for dirpath, dirnames, filenames in os.walk(p, onerror=partial(_unlisted, cands)):
                dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
                in_config = not CONFIG_DIRS.isdisjoint(dirpath.split(os.sep))
                for name in sorted(filenames):
                    if name.endswith(".py") or (in_config and name.endswith((".yaml", ".yml"))):
                        cands.append(os.path.join(dirpath, name))
        else:
            # Named explicitly (a file, or a special entry: dangling link, FIFO, socket): Python and YAML
            # only (pre-commit may pass others); special ones fail on read with their path in the message.
            # A symbolic link that leads nowhere (dangling, looping) may have meant a folder: kept, so
            # that its read names it.
            cands = [p] if p.endswith((".py", ".pyi", ".yaml", ".yml")) or _leads_nowhere(p) else []
        for c in cands:
            r = os.path.abspath(c)  # no realpath: a syscall per path component
            if r not in seen:
                seen.add(r)
                out.append(c)
    return out


def _leads_nowhere(path: str) -> bool:
    try:
        os.stat(path)
    except OSError:
        return os.path.islink(path)
    return False


def _unlisted(cands: list[str], err: OSError) -> None:
    if err.filename:
        cands.append(err.filename)


_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class TooLarge(OSError):
    """A file over ``MAX_SOURCE_BYTES``: not read (its finding says so). ``size``: its size, or what was
    read of it when it grew past the bound while being read."""

    def __init__(self, size: int) -> None:
        super().__init__(0, f"larger than {MAX_SOURCE_BYTES} bytes")
        self.size = size


def too_large(display: str, size: int) -> Finding:
    return meta(
        display,
        1,
        1,
        "OMNI-META-001",
        f"file of {size:,} bytes is larger than the {MAX_SOURCE_BYTES // 2**20} MiB the linter reads"
        " (a generated data file?); no rule checked this file",
        key="too-large",
    )


def read_source(path: str, limit: int | None = None) -> bytes:
    """The bytes of a regular file, at most ``limit`` (default ``MAX_SOURCE_BYTES``; over it: TooLarge,
    also for a file that grows while it is read). Raises OSError with a message that says what the entry
    is otherwise: opened non-blocking, so a FIFO named ``*.py`` can never hang the run."""
    limit = MAX_SOURCE_BYTES if limit is None else limit
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError as exc:
        if os.path.islink(path):
            raise OSError(exc.errno, f"dangling symbolic link to {os.readlink(path)}") from None
        raise OSError(exc.errno, "no such file") from None
    except OSError as exc:
        try:  # a socket refuses open() with ENXIO: say what the entry is rather than the errno text
            mode = os.stat(path).st_mode
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise OSError(exc.errno, f"not a regular file ({_file_type(mode)})") from None
        raise OSError(exc.errno, exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(0, f"not a regular file ({_file_type(st.st_mode)})")
        if st.st_size > limit:
            raise TooLarge(st.st_size)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(max(st.st_size + 1, 65536), limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise TooLarge(total)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _file_type(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "a special file"


def display_path(p: Path) -> str:
    try:
        rel = os.path.relpath(p)
    except ValueError:
        return str(p)
    return str(p) if rel.startswith("..") else rel


# --- per-file work (runs in workers) --------------------------------------------------------------
def _body_table(tree: ast.Module, owner: ast.AST) -> tuple[list[ast.stmt], list[int]]:
    """The statements directly inside ``owner`` (bodies, else/finally blocks, handlers, match cases)
    and their first lines, built once per node and kept on the tree: findings locate their statement
    by bisection, so a file with many findings costs O(findings x depth x log n), not O(findings x n)."""
    tables = tree.__dict__.setdefault("_omni_bodies", {})
    hit = tables.get(id(owner))
    if hit is None:
        if owner is tree:
            stmts = list(tree.body)
        else:
            inner = []
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                for item in getattr(owner, name, []) or []:
                    inner.extend(item.body if isinstance(item, (ast.ExceptHandler, ast.match_case)) else [item])
            stmts = [st for st in inner if isinstance(st, ast.stmt)]
            stmts.sort(key=lambda st: st.lineno)  # handlers/cases sit between body and orelse
        hit = tables[id(owner)] = (stmts, [st.lineno for st in stmts])
    return hit


def _containing(stmts: list[ast.stmt], starts: list[int], line: int) -> list[ast.stmt]:
    """The statements of one body that span ``line``, first first. Statements of a body are ordered
    and only share boundary lines (``a = 1; b = 2``), so they are the run that ends at the last
    statement starting on or before the line."""
    i = bisect_right(starts, line) - 1
    run = []
    while i >= 0 and (getattr(stmts[i], "end_lineno", None) or stmts[i].lineno) >= line:
        run.append(stmts[i])
        i -= 1
    run.reverse()
    return run


def enclosing_stmt(tree: ast.Module, line: int, col: int) -> ast.AST | None:
    owner, best = tree, None
    while True:
        stmts, starts = _body_table(tree, owner)
        run = _containing(stmts, starts, line)
        if not run:
            return best
        best = owner = run[0]


def _header(stmt: ast.AST) -> ast.AST:
    """A compound statement's own expression (its test, iterator, items), not its body."""
    for attr in ("test", "iter", "subject"):
        if hasattr(stmt, attr):
            return getattr(stmt, attr)
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return ast.Tuple([i.context_expr for i in stmt.items], ast.Load())
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return ast.Constant(stmt.name)
    return stmt


def stmt_digest(tree: ast.Module | None, line: int, col: int, fallback: str = "") -> str:
    stmt = enclosing_stmt(tree, line, col) if tree is not None else None
    if stmt is None:
        return hashlib.blake2b(" ".join(fallback.split()).encode(), digest_size=6).hexdigest()
    # One dump per statement, kept on the tree: a long statement with many findings (a 3,000-term sum
    # of host syncs) would otherwise be dumped once per finding, quadratic in its size.
    digests = tree.__dict__.setdefault("_omni_digests", {})
    digest = digests.get(id(stmt))
    if digest is None:
        raw = ast.dump(_header(stmt), include_attributes=False)
        digest = digests[id(stmt)] = hashlib.blake2b(raw.encode(), digest_size=6).hexdigest()
    return digest


def symbol_at(tree: ast.Module, line: int) -> str:
    """Qualified name of the innermost def/class (reached through defs and classes only) spanning the line."""
    best, owner, prefix = "<module>", tree, ""
    while True:
        stmts, starts = _body_table(tree, owner)
        node = next((n for n in _containing(stmts, starts, line) if isinstance(n, _SCOPES)), None)
        if node is None:
            return best
        best = prefix + node.name
        owner, prefix = node, best + "."


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def to_finding(rule: type[Rule], rep: Report, display: str, tree: ast.Module | None, line_text: str = "") -> Finding:
    symbol = rep.symbol or (symbol_at(tree, rep.line) if tree is not None else "<file>")
    digest = stmt_digest(tree, rep.line, rep.col, line_text or rep.message)
    return Finding(
        display,
        rep.line,
        rep.col,
        rule.id,
        rule.invariant,
        rule.severity,
        rep.message,
        symbol,
        digest,
        rep.fix[4] if rep.fix else None,
    )


def meta(display: str, line: int, col: int, rule: str, message: str, key: str = "") -> Finding:
    digest = hashlib.blake2b((key or message).encode(), digest_size=6).hexdigest()
    return Finding(display, line, col, rule, "META", "error", message, "<module>", digest)


def decode_source(data: bytes) -> str:
    """Source text as the interpreter reads it: the PEP 263 coding cookie or BOM decides the encoding
    (undecodable bytes become U+FFFD; ast.parse reports the real error), and every line ending
    (``\\r\\n``, a lone ``\\r``) becomes ``\\n``, so that line-based prefilters, regexes and the
    parser agree on line numbers."""
    encoding = "utf-8"
    if data[:3] == b"\xef\xbb\xbf" or b"coding" in data[:400]:
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError:
            encoding = "utf-8"
    try:
        text = data.decode(encoding, errors="replace")
    except LookupError:
        text = data.decode("utf-8", errors="replace")
    if text[:1] == "\ufeff":
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


# Deeply nested input (a 20,000-term sum, a long attribute chain) exceeds the default recursion limit in
# ast.parse or in a rule's recursive evaluation. Such a file is retried once in a thread with a large
# stack and a high limit; whatever still does not fit is a finding that names the file, never a crash.
DEEP_RECURSION_LIMIT = 60_000
DEEP_STACK_BYTES = 1 << 30


class _TooDeep(Exception):
    pass


def lint_source(
    display: str,
    rel: str,
    data: bytes,
    facts: TreeFacts,
    rules: list[type[Rule]],
    extra_entries: frozenset = frozenset(),
) -> tuple[list[Finding], list]:
    """Findings of one file, and its per-step calls into sibling modules (for the package pass)."""
    try:
        return _lint_source(display, rel, data, facts, rules, extra_entries, deep=False)
    except RecursionError:
        pass
    box: list = []

    def deep() -> None:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, DEEP_RECURSION_LIMIT))
        try:
            box.append(_lint_source(display, rel, data, facts, rules, extra_entries, deep=True))
        except (RecursionError, _TooDeep) as exc:
            box.append(exc)
        except BaseException as exc:  # re-raised in the caller's thread
            box.append(exc)
        finally:
            sys.setrecursionlimit(old)

    old_size = threading.stack_size()
    try:
        threading.stack_size(DEEP_STACK_BYTES)  # applies to threads started while it is set
        worker = threading.Thread(target=deep, name="omnitts-lint-deep")
        worker.start()
    finally:
        threading.stack_size(old_size)
    worker.join()
    out = box[0] if box else RecursionError("no result")
    if isinstance(out, tuple):
        return out
    if isinstance(out, (RecursionError, _TooDeep)):
        where = f" in {out}" if isinstance(out, _TooDeep) else " to parse"
        return [
            meta(
                display,
                1,
                1,
                "OMNI-META-001",
                f"expressions nest too deeply to analyse (past a recursion limit of {DEEP_RECURSION_LIMIT:,}{where}); "
                "no rule could check this file",
                key="too-deep",
            )
        ], []
    raise out


def _lint_source(
    display: str,
    rel: str,
    data: bytes,
    facts: TreeFacts,
    rules: list[type[Rule]],
    extra_entries: frozenset,
    deep: bool,
) -> tuple[list[Finding], list]:
    if rel.endswith((".yaml", ".yml")):
        return [], []  # config files are read by the tree-scope rules; suppressions applied there
    text = decode_source(data)
    known = set(all_rules())
    try:
        tree = ast.parse(data, filename=display)
    except (SyntaxError, ValueError, MemoryError) as exc:
        line = getattr(exc, "lineno", None) or 1
        why = getattr(exc, "msg", None) or str(exc)
        if isinstance(exc, MemoryError):  # CPython's parser gives up on very deep nesting this way
            why = "the parser ran out of stack or memory (nesting too deep for CPython itself)"
        return [
            meta(
                display,
                line,
                (getattr(exc, "offset", None) or 1),
                "OMNI-META-001",
                f"file does not parse, no rule could check it: {exc.__class__.__name__}: {why}",
                key="parse-error",
            )
        ], []
    src = SourceFile(display, rel, text, tree, facts, extra_entries)
    kind = src.kind
    findings: list[Finding] = []
    ran: set[str] = set()
    mentioned: dict[tuple, bool] = {}  # rules of one invariant share their needles
    for rule in rules:
        if rule.scope != "file" or kind not in rule.kinds:
            continue
        ran.add(rule.id)
        if rule.needles:
            key = tuple(rule.needles)
            hit = mentioned.get(key)
            if hit is None:
                hit = mentioned[key] = _mentions(key, text)
            if not hit:
                continue
        try:
            for rep in rule().check(src):
                findings.append(to_finding(rule, rep, display, tree))
        except RecursionError:
            if deep:
                raise _TooDeep(rule.id) from None
            raise
        except Exception as exc:  # fail closed: a crashing rule is a finding and an error exit
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            findings.append(
                meta(
                    display,
                    1,
                    1,
                    "OMNI-META-004",
                    f"internal error in {rule.id}: {exc.__class__.__name__}: {exc} "
                    f"({Path(tb.filename).name}:{tb.lineno}); the file was not fully checked",
                )
            )
    findings = suppressions.apply(display, text, findings, ran, known)
    outgoing = {}
    if "index" in src.__dict__:  # a model rule built the index: export cross-module per-step calls
        try:
            index = src.index
            loopy = _loopy(index, text)
            outgoing = {"calls": index.outgoing(), "loopy": loopy}
        except RecursionError:
            raise
        except Exception as exc:
            findings.append(meta(display, 1, 1, "OMNI-META-004", f"internal error in the package pass: {exc}"))
    # The analyses cached on the file (index, class states, walkers' results) refer back to it: drop them
    # so that reference counting frees this file's tree now, not a later cycle collection (which then
    # traverses every tree still waiting: the lint paid twice the parse time in the collector).
    src.__dict__.clear()
    return sorted(set(findings), key=Finding.sort_key), outgoing


_LOOSE_NEEDLES: dict[tuple, tuple[re.Pattern, list[list[str]]]] = {}


def _mentions(needles, text: str) -> bool:
    """A rule's textual prefilter. Needles are written in canonical spacing (``def forward``, ``id(``);
    code spelled ``def  forward (`` or ``id (x)`` is the same code and must not skip the rule. The
    loose pattern only runs when every piece of some needle (split at its spaces and parentheses) is
    in the text: it cannot match otherwise, and most files mention no needle at all."""
    if any(n in text for n in needles):
        return True
    key = tuple(needles)
    entry = _LOOSE_NEEDLES.get(key)
    if entry is None:
        parts = [re.escape(n).replace("\\ ", r"\s+").replace("\\(", r"\s*\(") for n in needles]
        pieces = [[p for p in re.split(r"[ (]", n) if p] for n in needles]
        entry = _LOOSE_NEEDLES[key] = (re.compile("|".join(parts)), pieces)
    loose, pieces = entry
    if not any(all(p in text for p in ps) for ps in pieces):
        return False
    return loose.search(text) is not None


# `\b(?:for|while|yield)\b`, spelled to start with a character set: the regex engine then skips to the
# next f/w/y instead of trying three alternatives at every position (four times faster on a package).
_LOOPY = re.compile(r"[fwy](?<!\w[fwy])(?:(?<=f)or|(?<=w)hile|(?<=y)ield)(?!\w)")


def _loopy(index, text: str) -> list[tuple[str, str]]:
    """(class or "", name) of the functions whose lines hold a loop or a yield: one search of the
    file's text, then each function's line span (a keyword never spans lines)."""
    kw: list[int] = []  # 1-based numbers of the lines holding a keyword, ascending
    line, prev = 1, 0
    for m in _LOOPY.finditer(text):
        line += text.count("\n", prev, m.start())
        prev = m.start()
        if not kw or kw[-1] != line:
            kw.append(line)
    out = []
    for f in index.functions.values():
        i = bisect_left(kw, f.node.lineno)
        if i < len(kw) and kw[i] <= f.node.end_lineno:
            out.append((f.cls or "", f.name))
    return sorted(out)


def unreadable(display: str, error: str) -> Finding:
    return meta(display, 1, 1, "OMNI-META-004", f"cannot read {display}: {error}; the file was not checked")


def _lint_chunk(items: list[tuple], facts: TreeFacts, rule_ids: list[str]):
    reg = all_rules()
    rules = [reg[r] for r in rule_ids]
    out = []
    for abs_path, display, rel, digest, extra in items:
        try:
            data = read_source(abs_path)
        except TooLarge as exc:  # grew past the bound since it was hashed
            out.append((abs_path, digest, [too_large(display, exc.size)], []))
            continue
        except OSError as exc:  # changed since it was hashed: fail closed
            out.append((abs_path, digest, [unreadable(display, exc.strerror or str(exc))], []))
            continue
        try:
            found, outgoing = lint_source(display, rel, data, facts, rules, extra)
            out.append((abs_path, digest, found, outgoing))
        except Exception as exc:  # fail closed, naming the file
            out.append((abs_path, digest, [meta(display, 1, 1, "OMNI-META-004", f"cannot lint file: {exc}")], []))
    return out


# --- orchestration --------------------------------------------------------------------------------
@dataclass
class FileItem:
    path: str  # absolute
    display: str
    rel: str
    data: bytes
    digest: str
    error: str | None = None  # why the file could not be read (then data is empty)
    size: int | None = None  # the size of a file over MAX_SOURCE_BYTES (not read: data is empty)


def read_items(files: list[str], root: Path | None) -> list[FileItem]:
    items = []
    cwd = os.getcwd() + os.sep
    root_s = os.fspath(root) + os.sep if root is not None else None
    for f in files:
        absf = os.path.abspath(f)
        display = absf[len(cwd) :] if absf.startswith(cwd) else absf
        if root_s is not None and absf.startswith(root_s):
            rel = absf[len(root_s) :].replace(os.sep, "/")
        else:
            rel = display.replace(os.sep, "/")
        size = None
        try:
            data, error = read_source(f), None
        except TooLarge as exc:
            data, error, size = b"", exc.strerror, exc.size
        except OSError as exc:  # reported as a finding on this file; the rest of the run goes on
            data, error = b"", exc.strerror or str(exc)
        digest = hashlib.blake2b(data, digest_size=16).hexdigest()
        items.append(FileItem(absf, display, rel, data, digest, error, size))
    return items


def run_file_rules(items: list[FileItem], facts: TreeFacts, rules, jobs: int, cache, background=None) -> LintResult:
    """``rules``: the rule classes, or a callable returning them (imported only on a cache miss).
    ``background`` runs in this process while the workers lint (the tree-scope rules)."""
    pool = _Pool(jobs)
    try:
        return _run_file_rules(items, facts, rules, pool, cache, background)
    finally:
        pool.close()


class _Pool:
    """One worker pool for both passes, started on first use (fork: workers inherit the imported rules).

    It also keeps the cycle collector out of the way while files are linted (the bare parse of a
    package spends a fifth of its time in it; a file's trees and analyses hold no reference cycles,
    reference counting frees them): the rule modules and the rest of the heap are frozen (gc.freeze)
    before the first file is linted or a worker is forked, so a full collection traverses only the
    files' own objects and forked workers do not touch (and so copy) the pages they inherited; and a
    young-generation collection waits for 50,000 new objects instead of 700 (a parsed tree is
    thousands of objects, none of them garbage). Both are undone when the run ends; a host process
    that freezes its own heap keeps its freeze."""

    GEN0_THRESHOLD = 50_000

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool = None
        self._froze = False
        self._threshold: tuple[int, ...] | None = None

    def quiet_gc(self) -> None:
        if self._threshold is None:
            self._threshold = gc.get_threshold()
            gc.set_threshold(max(self._threshold[0], self.GEN0_THRESHOLD), *self._threshold[1:])
        if not self._froze and gc.get_freeze_count() == 0:
            gc.freeze()
            self._froze = True

    @property
    def started(self) -> bool:
        return self._pool is not None

    def get(self) -> ProcessPoolExecutor:
        if self._pool is None:
            import multiprocessing as mp

            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=ctx)
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
        if self._froze:
            gc.unfreeze()
            self._froze = False
        if self._threshold is not None:
            gc.set_threshold(*self._threshold)
            self._threshold = None


def _run_file_rules(items: list[FileItem], facts: TreeFacts, rules, pool: _Pool, cache, background) -> LintResult:
    res = LintResult(files=len(items))
    found: dict[str, list[Finding]] = {}
    outgoing: dict[str, list] = {}
    todo = []
    for it in items:
        if it.error is not None:
            finding = too_large(it.display, it.size) if it.size is not None else unreadable(it.display, it.error)
            found[str(it.path)], outgoing[str(it.path)] = [finding], {}
            continue
        hit = cache.get(str(it.path), it.digest, it.display) if cache is not None else None
        if hit is not None:
            found[str(it.path)], outgoing[str(it.path)] = hit
            res.cached += 1
        else:
            todo.append(it)
    if callable(rules) and not isinstance(rules, list):
        get_rules = rules
    else:

        def get_rules():
            return rules

    first_pass = _dispatch([(it, frozenset()) for it in todo], facts, get_rules, pool, background=background)
    for abs_path, digest, f, out in first_pass:
        found[abs_path], outgoing[abs_path] = f, out
        if cache is not None and not any(x.rule == "OMNI-META-004" for x in f):
            cache.put(abs_path, digest, f, out)
    # Package pass: a helper module's functions that a sibling calls per step (`self.flow_head.solve(...)`
    # in a loop of forward) are per-step entries there too; re-lint those few files with the entries.
    extras = package_entries(items, outgoing)
    second = []
    for it in items:
        extra = extras.get(str(it.path))
        if not extra:
            continue
        key = f"{it.path}#entries={hash_entries(extra)}"
        hit = cache.get(key, it.digest, it.display) if cache is not None else None
        if hit is not None:
            found[str(it.path)] = hit[0]
        else:
            second.append((it, extra))
    # The second pass re-runs only the rules whose result depends on what is hot.
    for abs_path, digest, f, _out in _dispatch(second, facts, get_rules, pool, only=HOT_RULES):
        first = [x for x in found.get(abs_path, []) if not _hot_dependent(x)]
        f = sorted(set(first + f), key=Finding.sort_key)
        found[abs_path] = f
        if cache is not None and not any(x.rule == "OMNI-META-004" for x in f):
            cache.put(f"{abs_path}#entries={hash_entries(extras[abs_path])}", digest, f, [])
    for it in items:
        res.findings.extend(found.get(str(it.path), []))
    return res


# Rules whose findings depend on the per-step/hot sets (re-run by the package pass).
HOT_RULES = frozenset(
    {
        "OMNI-I3-001",
        "OMNI-I3-002",
        "OMNI-I3-003",
        "OMNI-I3-004",
        "OMNI-I3-005",
        "OMNI-I5-005",
        "OMNI-I5-006",
        "OMNI-INT-006",
    }
)


def _hot_dependent(f: Finding) -> bool:
    if f.rule in HOT_RULES:
        return True
    return f.rule == "OMNI-META-003" and any(r in f.message for r in HOT_RULES)


def hash_entries(extra: frozenset) -> str:
    return hashlib.blake2b(repr(sorted(extra)).encode(), digest_size=6).hexdigest()


def package_entries(items: list[FileItem], outgoing: dict[str, list]) -> dict[str, frozenset]:
    """Resolve each file's per-step calls into sibling modules to (class, function, hot) entries."""
    by_module: dict[str, str] = {}
    for it in items:
        if it.rel.endswith(".py"):
            by_module[it.rel[:-3].replace("/", ".").removesuffix(".__init__")] = str(it.path)
    suffix: dict[str, str] = {}
    for m in by_module:  # `omnitts.x.models.m` is imported as `x.models.m`, `models.m`, ...
        parts = m.split(".")
        for i in range(1, len(parts)):
            suffix.setdefault(".".join(parts[i:]), m)
    acc: dict[str, set] = {}
    for it in items:
        calls = (outgoing.get(str(it.path)) or {}).get("calls") or []
        if not calls:
            continue
        pkg = it.rel[:-3].replace("/", ".").rsplit(".", 1)[0] if "/" in it.rel else ""
        for module, level, cls, name, hot in calls:
            if level:
                base = pkg.rsplit(".", level - 1)[0] if level > 1 else pkg
                target_mod = f"{base}.{module}" if base else module
            else:
                target_mod = module if module in by_module else suffix.get(module, module)
            target = by_module.get(target_mod)
            if target is None or target == str(it.path):
                continue
            # Only worth a second pass when the entry can change what is hot there: a model file
            # whose function has a loop (or the call site is hot: then its whole body is).
            summary = outgoing.get(target)
            if not summary or not (hot or (cls, name) in set(map(tuple, summary.get("loopy", ())))):
                continue
            acc.setdefault(target, set()).add((cls, name, bool(hot)))
    return {k: frozenset(v) for k, v in acc.items()}


def _dispatch(
    work: list[tuple[FileItem, frozenset]], facts: TreeFacts, get_rules, pool: _Pool, only=None, background=None
):
    if not work:
        if background is not None:
            background()
        return
    rules = [r for r in get_rules() if only is None or r.id in only]
    rule_ids = [r.id for r in rules]
    pool.quiet_gc()
    size = sum(len(it.data) for it, _x in work)
    # Small work stays in this process unless the workers are running already (the package pass).
    if pool.jobs > 1 and len(work) > 1 and (size >= PARALLEL_MIN_BYTES or pool.started):
        chunks = _balanced(work, pool.jobs * 4)
        executor = pool.get()
        futs = [
            executor.submit(_lint_chunk, [(str(i.path), i.display, i.rel, i.digest, x) for i, x in c], facts, rule_ids)
            for c in chunks
        ]
        if background is not None:
            background()  # the parent would only wait otherwise
        for fut in futs:
            yield from fut.result()
        return
    for it, extra in work:
        f, out = lint_source(it.display, it.rel, it.data, facts, rules, extra)
        yield str(it.path), it.digest, f, out
    if background is not None:
        background()


def _balanced(work: list[tuple[FileItem, frozenset]], n: int) -> list[list[tuple[FileItem, frozenset]]]:
    chunks: list[list] = [[] for _ in range(max(1, n))]
    sizes = [0] * len(chunks)
    for w in sorted(work, key=lambda w: -len(w[0].data)):
        k = sizes.index(min(sizes))
        chunks[k].append(w)
        sizes[k] += len(w[0].data)
    return [c for c in chunks if c]


def run_tree_rules(ctx: TreeContext, rules: list[type[Rule]]) -> LintResult:
    """Tree-scope rules; findings on YAML/Python files get suppressions applied like file findings."""
    res = LintResult()
    per_path: dict[str, list[Finding]] = {}
    ran = {r.id for r in rules if r.scope == "tree"}
    trees: dict[str, ast.Module | None] = {}
    lines_of: dict[str, list[str]] = {}  # split once per file, not once per finding
    for rule in rules:
        if rule.scope != "tree":
            continue
        try:
            for rep in rule().check_tree(ctx):
                rel = rep.path or ""
                if not ctx.in_focus(rel):
                    continue
                absf = ctx.root / rel
                display = display_path(absf)
                text = ctx.read(rel)
                if rel not in trees:
                    try:
                        trees[rel] = ast.parse(text) if rel.endswith(".py") else None
                    except (SyntaxError, ValueError, RecursionError, MemoryError):
                        trees[rel] = None
                    lines_of[rel] = text.splitlines()
                lines = lines_of[rel]
                line_text = lines[rep.line - 1] if 0 < rep.line <= len(lines) else rep.message
                per_path.setdefault(rel, []).append(to_finding(rule, rep, display, trees[rel], line_text.strip()))
        except Exception as exc:
            tb = traceback.extract_tb(exc.__traceback__)[-1]
            res.errors.append(
                f"internal error in {rule.id}: {exc.__class__.__name__}: {exc} ({Path(tb.filename).name}:{tb.lineno})"
            )
    known = set(all_rules())
    for rel, found in per_path.items():
        text = ctx.read(rel)
        display = found[0].path
        kept = suppressions.apply(display, text, found, set(), known, python=rel.endswith(".py"))
        res.findings.extend(kept)
    # Unused suppressions of tree rules in config files the run covered.
    for rel in ctx.memo("config_files", lambda: []):
        if rel in per_path or not ctx.in_focus(rel):
            continue
        text = ctx.read(rel)
        if suppressions.MARK in text:
            res.findings.extend(suppressions.apply(display_path(ctx.root / rel), text, [], ran, known, python=False))
    return res


__all__ = ["CONFIG", "LintResult", "UsageError", "discover", "run_file_rules", "run_tree_rules", "select_rules"]
