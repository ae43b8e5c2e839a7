"""`omnitts-lint PATH... [--format {text,json,github,sarif}] [--select RULES] [--baseline FILE] [--jobs N]`

Exit codes: 0 clean, 1 findings (or stale baseline entries), 2 usage error or missing input (a path
that does not exist: the other paths are still linted), 3 internal error (a rule crashed, a file
could not be read: a dangling symlink, a FIFO, no permission): every failure mode is non-zero, and
the highest one wins. Every file that could not be checked is named on its own line.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from omnitts.console.cli_io import emit, quiet_on_closed_pipe

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse exits 2 already; keep the message on one line
        self.print_usage(sys.stderr)
        print(f"omnitts-lint: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="omnitts-lint", description="Static checks of vLLM-Omni TTS integrations (invariants I1-I5).")
    p.add_argument("paths", nargs="*", help="files or directories (default with --integration: the current directory)")
    p.add_argument("--format", choices=("text", "json", "github", "sarif"), default="text")
    p.add_argument("--select", help="comma-separated rule ids, prefixes (OMNI-I3) or invariants (I3, INT)")
    p.add_argument(
        "--baseline", help=f"baseline file (default: nearest ./{'.omnitts-lint-baseline.json'} above the paths)"
    )
    p.add_argument("--no-baseline", action="store_true", help="ignore any baseline file")
    p.add_argument("--write-baseline", metavar="FILE", help="write current findings as a baseline (needs --reason)")
    p.add_argument("--reason", default="", help="reason recorded on entries written by --write-baseline")
    p.add_argument(
        "--full-scan", action="store_true", help="reject stale baseline entries (CI); implied by --integration"
    )
    p.add_argument("--jobs", "-j", type=int, default=0, help="worker processes (0 = one per CPU)")
    p.add_argument("--root", help="tree root for relative paths and target facts (default: detected)")
    p.add_argument(
        "--integration",
        action="store_true",
        help="run the tree-wide integration checks (configs, examples, consolidation)",
    )
    p.add_argument(
        "--changed",
        action="store_true",
        help="integration hook: PATHS are the changed files (default: git's staged files); the tree-wide "
        "checks report only findings involving the models they touch (implies --integration)",
    )
    p.add_argument(
        "--shrink-baseline",
        action="store_true",
        help="lower the baseline's counts to what this run found and drop fixed entries (never adds any)",
    )
    p.add_argument("--fix", action="store_true", help="apply safe autofixes, then report what remains")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the content-hash cache")
    p.add_argument("--list-rules", action="store_true", help="list rules and exit")
    p.add_argument("--rule", metavar="ID", help="explain one rule (with its examples) and exit")
    p.add_argument("--output", "-o", help="write the report to a file instead of stdout")
    return p


def _explain(rule) -> str:
    parts = rule.doc_parts()
    out = [
        f"{rule.id} ({rule.name}) — invariant {rule.invariant}, severity {rule.severity}, scope {rule.scope}"
        + (", autofix" if rule.fixable else ""),
        "",
        parts["what"],
        "",
        "Why: " + parts["why"],
        "",
        "Fix: " + parts["fix"],
    ]
    for title, cases in (("Invalid", rule.INVALID), ("Valid", rule.VALID)):
        for c in cases[:2]:
            out += ["", f"{title} ({c.path}):"]
            body = c.code if c.code else "\n".join(f"# {k}\n{v}" for k, v in c.files.items())
            out += ["    " + line for line in body.strip("\n").splitlines()]
    return "\n".join(out) + "\n"


@quiet_on_closed_pipe
def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # usage errors (and --help) return their code instead of exiting
        return int(exc.code or 0) if isinstance(exc.code, int) or exc.code is None else EXIT_USAGE
    try:
        return _run(args)
    except KeyboardInterrupt:
        return EXIT_INTERNAL
    except (SystemExit, BrokenPipeError):  # a closed pipe is the reader's choice, not an internal error
        raise
    except Exception as exc:  # fail closed, loudly
        from omnitts.validators.static.baseline import BaselineError
        from omnitts.validators.static.linter import UsageError

        if isinstance(exc, (UsageError, BaselineError)):
            print(f"omnitts-lint: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        import traceback

        traceback.print_exc()
        print(f"omnitts-lint: internal error: {exc.__class__.__name__}: {exc}", file=sys.stderr)
        return EXIT_INTERNAL


def _run(args) -> int:
    from omnitts.validators.static import linter

    if args.list_rules:
        emit(
            "".join(
                f"{rid:14} {rule.invariant:5} {rule.severity:8} {rule.summary()}\n"
                for rid, rule in sorted(linter.all_rules().items())
            )
        )
        return EXIT_OK
    if args.rule:
        rules = linter.all_rules()
        if args.rule not in rules:
            print(f"omnitts-lint: error: unknown rule {args.rule!r} (see --list-rules)", file=sys.stderr)
            return EXIT_USAGE
        emit(_explain(rules[args.rule]))
        return EXIT_OK
    args.integration = args.integration or args.changed
    if not args.paths and not args.integration:
        print("omnitts-lint: error: no paths given", file=sys.stderr)
        return EXIT_USAGE
    if args.jobs < 0:
        print("omnitts-lint: error: --jobs must be >= 0", file=sys.stderr)
        return EXIT_USAGE

    from omnitts.validators.static import api, baseline, formats

    select = [s for s in (args.select or "").split(",") if s.strip()] or None
    jobs = args.jobs or (os.cpu_count() or 1)
    res = api.run(
        args.paths,
        select=select,
        root=args.root,
        integration=args.integration,
        jobs=jobs,
        use_cache=not args.no_cache and not args.fix,
        changed=args.paths if args.changed else None,
        keep_going=True,
    )
    findings = res.findings
    for note in res.notices if args.changed else ():
        print(f"omnitts-lint: {note}", file=sys.stderr)
    if args.fix:
        from omnitts.validators.static.fixes import apply_fixes

        n, _rest = apply_fixes(findings)
        print(f"omnitts-lint: applied {n} fix(es)", file=sys.stderr)
        res = api.run(
            args.paths,
            select=select,
            root=args.root,
            integration=args.integration,
            jobs=jobs,
            changed=args.paths if args.changed else None,
            keep_going=True,
        )
        findings = res.findings

    if args.write_baseline:
        count = baseline.write(Path(args.write_baseline), findings, args.reason)
        print(f"omnitts-lint: wrote {count} baseline entries to {args.write_baseline}", file=sys.stderr)
        findings = [f for f in findings if f.rule.startswith("OMNI-META")]

    stale: list[str] = []
    bl_path = (
        None
        if args.no_baseline or args.write_baseline
        else (
            Path(args.baseline)
            if args.baseline
            else baseline.find_default(Path(os.path.realpath(_first_existing(args.paths))))  # loops: no error
        )
    )
    if args.shrink_baseline and bl_path is None:
        print("omnitts-lint: error: --shrink-baseline: no baseline file (give --baseline FILE)", file=sys.stderr)
        return EXIT_USAGE
    if bl_path is not None:
        entries = baseline.load(bl_path)
        base = bl_path.parent
        full = not args.changed and (
            args.full_scan or args.integration or any(Path(p).resolve() == base.resolve() for p in args.paths)
        )
        # The run's coverage decides which entries it judges (one baseline serves both hooks).
        scanned = (
            None
            if full or res.coverage
            else {baseline._rel(str(p), base) for p in _scanned_files(args.paths, res.missing)}
        )
        outcome = baseline.compare(findings, entries, base, scanned, full, res.coverage)
        findings, stale = outcome.new, outcome.stale
        if args.shrink_baseline:
            lowered, dropped = baseline.shrink(bl_path, entries, outcome)
            print(f"omnitts-lint: {bl_path}: {lowered} entries lowered, {dropped} dropped", file=sys.stderr)
            stale = []
        for note in outcome.notices if not args.shrink_baseline else ():  # shrinking acts on them
            print(f"omnitts-lint: notice: {note}", file=sys.stderr)
        if outcome.baselined:
            print(f"omnitts-lint: {outcome.baselined} finding(s) accepted by {bl_path}", file=sys.stderr)

    # Rule metadata only for SARIF: a cached run of the other formats imports no rule module.
    report = formats.render(findings, args.format, linter.all_rules() if args.format == "sarif" else None)
    if args.output:
        Path(args.output).write_text(report, encoding="utf-8")
    else:
        emit(report)
    for line in stale:
        print(f"omnitts-lint: error: {line}", file=sys.stderr)
    for err in res.errors:
        print(f"omnitts-lint: internal error: {err}", file=sys.stderr)
    if args.format != "text" or args.output:  # the text report on stdout names them already
        for path in sorted({f.path for f in findings if f.rule in ("OMNI-META-001", "OMNI-META-004")}):
            print(f"omnitts-lint: error: {path} was not (fully) checked; see its OMNI-META finding", file=sys.stderr)
    for path in res.missing:
        print(f"omnitts-lint: error: no such file or directory: {path}", file=sys.stderr)
    for path in args.paths if not res.files else ():  # a directory with nothing to check: say so
        if path not in res.missing and os.path.isdir(path):
            print(
                f"omnitts-lint: warning: {path} is a directory without Python files or stage configs", file=sys.stderr
            )
    print(_summary(res, findings, stale), file=sys.stderr)
    if res.errors or any(f.rule == "OMNI-META-004" for f in findings):
        return EXIT_INTERNAL
    if res.missing:
        return EXIT_USAGE
    if findings or stale:
        return EXIT_FINDINGS
    return EXIT_OK


def _summary(res, findings: list, stale: list[str]) -> str:
    """One line on stderr for every run, clean ones included: what was checked, and the outcome."""
    files = f"{res.files} file(s)" + (f" ({res.cached} from cache)" if res.cached else "")
    if not res.files:
        files = "the tree-scope checks" if res.tree_ran else "0 files (nothing in the paths to check)"
    rules = f", {res.rules} rule(s)" if res.rules else ""
    if findings or stale:
        outcome = f"{len(findings)} finding(s)" + (f", {len(stale)} stale baseline entr(y/ies)" if stale else "")
    else:
        outcome = "no findings"
    return f"omnitts-lint: {files}{rules}: {outcome}"


def _first_existing(paths: list[str]) -> str:
    return next((p for p in paths if os.path.lexists(p)), ".")


def _scanned_files(paths: list[str], missing: list[str]) -> list[Path]:
    from omnitts.validators.static.linter import discover

    return discover([Path(p) for p in paths if p not in missing], [])


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
