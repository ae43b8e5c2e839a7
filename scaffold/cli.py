"""`omnitts-scaffold`: the command line. Bad input is one line on stderr and a non-zero exit.

omnitts-scaffold new NAME --pattern P | --like EXISTING   write a model integration (one transaction)
omnitts-scaffold check NAME                               integration report of an existing model
omnitts-scaffold remove NAME                              exact inverse of `new`
omnitts-scaffold resolve [BASE OURS THEIRS --path P]      merge shared files keeping both models (git merge driver)
omnitts-scaffold clean [--work-dir DIR] [--all]           remove the working copies `--target pypi:` made
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from omnitts.console.cli_io import quiet_on_closed_pipe
from omnitts.knowledge import releases
from omnitts.knowledge.eras import detect_profile
from omnitts.scaffold.errors import ScaffoldError
from omnitts.scaffold.naming import PATTERNS, make_names


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line on stderr and exit 2, as every other refusal (`--help` shows the usage)."""

    def error(self, message: str):
        one_line = " ".join(message.split())
        self.exit(2, f"omnitts-scaffold: error: {one_line} (see {self.prog} --help)\n")


def _text(value: str) -> str:
    """A value that must say something: an empty --target is not the current directory, an empty
    --model-type is not the default."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def _folder(value: str) -> Path:
    """A folder that is there, or that can be made (not a file)."""
    path = Path(_text(value))
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} exists and is not a folder")
    return path


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="omnitts-scaffold", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    target_help = "a vLLM-Omni tree (default: the current directory) or pypi:vllm-omni==X.Y.Z"
    work_help = (
        "folder for the working copies of --target pypi:... (default: <cache>/work); an unchanged copy is reused"
    )

    new = sub.add_parser("new", help="write a complete TTS model integration into a vLLM-Omni tree")
    new.add_argument("name", help="model name: lower_snake_case Python identifier (package folder)")
    how = new.add_mutually_exclusive_group(required=True)
    how.add_argument("--pattern", choices=PATTERNS, help="generate a runnable tiny model of this architecture pattern")
    how.add_argument(
        "--like",
        type=_text,
        metavar="EXISTING",
        help="copy an in-tree model's integration (folder, model type or pipeline key), renamed",
    )
    new.add_argument("--target", default=".", type=_text, help=target_help)
    new.add_argument("--work-dir", type=_folder, help=work_help)
    new.add_argument("--stage-key", type=_text, help="model_stage of the entry stage (default: NAME)")
    new.add_argument(
        "--arch",
        type=_text,
        help="registry architecture name (default: <Name>ForConditionalGeneration; not with --like)",
    )
    new.add_argument(
        "--model-type",
        type=_text,
        help="HF model_type, deploy yaml stem, pipeline key and adapter name (default: NAME)",
    )
    new.add_argument("--priority", default="medium", choices=("high", "medium", "low"), help="CI tier of the e2e tests")
    new.add_argument(
        "--voice-cloning", action="store_true", help="forward ref_audio / ref_text (the model clones voices)"
    )
    new.add_argument(
        "--detect-priority",
        type=int,
        help="0.28+: share a stage key another adapter owns; this adapter runs first and matches by architecture",
    )
    new.add_argument("--dry-run", action="store_true", help="print the whole change as a unified diff, write nothing")
    new.add_argument(
        "--commit", action="store_true", help="commit the change in the target's git repo with a DCO sign-off"
    )

    check = sub.add_parser(
        "check", help="integration report of an existing model: each point present, missing or inconsistent"
    )
    check.add_argument("name", help="model type as serving detects it, pipeline key, or model folder")
    check.add_argument("--target", default=".", type=_text, help=target_help)
    check.add_argument("--work-dir", type=_folder, help=work_help)

    remove = sub.add_parser(
        "remove", help="the exact inverse of `new`: delete its files, reverse every shared-file patch"
    )
    remove.add_argument("name", help="model folder name given to `new`")
    remove.add_argument("--target", default=".", type=_text, help="a vLLM-Omni tree (default: the current directory)")
    remove.add_argument(
        "--dry-run", action="store_true", help="print the whole change as a unified diff, write nothing"
    )
    remove.add_argument(
        "--force",
        action="store_true",
        help="remove a folder new did not create (no pipeline.py, other files); still refused while the tree uses it",
    )

    resolve = sub.add_parser(
        "resolve", help="merge conflicts in shared files, keeping both models' additions (git merge driver)"
    )
    resolve.add_argument(
        "files",
        nargs="*",
        metavar="BASE OURS THEIRS",
        help="merge-driver mode (%%O %%A %%B): the merge is written into OURS",
    )
    resolve.add_argument("--path", default="", help="the file's path in the repo (%%P), for messages")
    resolve.add_argument(
        "--target", default=".", help="repository whose conflicted shared files to resolve (default: .)"
    )
    resolve.add_argument(
        "--install",
        action="store_true",
        help="register the merge driver for the shared files (.git/config, .git/info/attributes)",
    )

    clean = sub.add_parser("clean", help="remove the working copies that `--target pypi:...` made")
    clean.add_argument("--work-dir", type=_folder, help="the folder given to --work-dir (default: <cache>/work)")
    clean.add_argument(
        "--all", action="store_true", help="also remove copies a scaffold run wrote into (their models go with them)"
    )
    clean.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    return parser


# Working copies this run created: removed again when the run fails, so a refused target leaves nothing behind.
_FRESH_COPIES: list[Path] = []


def _resolve_target(spec: str, work_dir: Path | None = None) -> Path:
    version = releases.parse_spec(spec)
    if version is None:
        return Path(spec).resolve()
    detect_profile(releases.pristine_tree(version))  # an unsupported release is refused before anything is copied
    copy, created = releases.copy_for_run(version, work_dir)
    if created:
        _FRESH_COPIES.append(copy)
    print(f"{'working' if created else 'reusing unchanged'} copy of vllm-omni {version}: {copy}", file=sys.stderr)
    return copy


def _drop_fresh_copies() -> None:
    while _FRESH_COPIES:
        shutil.rmtree(_FRESH_COPIES.pop(), ignore_errors=True)


def _check_commit_possible(root: Path) -> None:
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)

    if git("rev-parse", "--is-inside-work-tree").returncode != 0:
        raise ScaffoldError(f"--commit needs a git repository at {root}")
    for key in ("user.name", "user.email"):
        if not git("config", key).stdout.strip():
            raise ScaffoldError(f"--commit needs git {key} (the DCO sign-off uses it); set it with git config")


def _commit(root: Path, paths: list[Path], message: str) -> None:
    rels = [str(p.relative_to(root)) for p in paths]
    subprocess.run(["git", "-C", str(root), "add", "-A", "--", *rels], check=True, capture_output=True)
    proc = subprocess.run(
        ["git", "-C", str(root), "commit", "-s", "-q", "-m", message, "--", *rels], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise ScaffoldError(f"git commit failed: {(proc.stderr.strip().splitlines() or ['?'])[-1]}")


def _era(profile) -> str:
    return f"{profile.era.title} era, vllm-omni {profile.version or '?'}"


def _finish(plan, root: Path, profile, *, dry_run: bool, nothing: str) -> list[Path] | None:
    for notice in plan.notices:
        print(f"notice: {notice}", file=sys.stderr)
    if dry_run:
        sys.stdout.write(plan.diff())
        print(f"dry run: {plan.summary()} would be written in {root} ({_era(profile)})", file=sys.stderr)
        return None
    if not plan.changes:
        print(nothing, file=sys.stderr)
        return None
    plan.command = plan.command or _command_line
    marks = [(_mark(op), op.rel) for op in plan.changes]
    written = plan.apply()
    print(f"{plan.summary()} in {root} ({_era(profile)})", file=sys.stderr)
    for mark, rel in marks:
        print(f"{mark:8} {rel}")
    return written


def _mark(op) -> str:
    """What happened to one file, as `new`/`remove` print it: created, patched or deleted."""
    return "created" if op.old is None else "deleted" if op.is_delete else "patched"


@contextlib.contextmanager
def _writing(root: Path) -> Iterator[None]:
    """The tree's lock, held from the plan's first read to its last write (a path that is no folder
    is refused as not a tree first)."""
    from omnitts.scaffold import journal

    if not root.is_dir():
        detect_profile(root)  # says in one line why this is not a vLLM-Omni tree
    with journal.tree_lock(root):
        yield


def cmd_new(args: argparse.Namespace) -> int:
    names = None
    if args.like is not None:
        if args.arch:
            raise ScaffoldError("--arch does not apply to --like: the source's architectures are renamed")
        if args.voice_cloning or args.detect_priority is not None:
            raise ScaffoldError(
                "--voice-cloning / --detect-priority do not apply to --like: the source's adapter is copied as it is"
            )
        message = f"[Model] Add {args.name} TTS (like {args.like}), generated by omnitts-scaffold"
    else:
        names = make_names(
            args.name,
            args.pattern,
            model_type=args.model_type,
            stage_key=args.stage_key,
            arch=args.arch,
            priority=args.priority,
        )
        message = f"[Model] Add {names.camel} TTS ({names.pattern}), generated by omnitts-scaffold"
    root = _resolve_target(args.target, args.work_dir)
    # One lock from the first read of the tree to the last write: another command's change can never
    # slip in between what the plan saw and what it writes.
    with _writing(root):
        profile = detect_profile(root)
        if args.commit and not args.dry_run:
            _check_commit_possible(root)
        if names is None:
            from omnitts.scaffold.like import plan_like

            plan = plan_like(profile, args.name, args.like, model_type=args.model_type, stage_key=args.stage_key)
        else:
            from omnitts.scaffold.new import plan_new

            plan = plan_new(profile, names, voice_cloning=args.voice_cloning, detect_priority=args.detect_priority)
        nothing = f"nothing to do: {args.name} is already integrated in {root}"
        written = _finish(plan, root, profile, dry_run=args.dry_run, nothing=nothing)
        if written and args.commit:
            _commit(root, written, message)
    if written:
        from omnitts.scaffold.new import next_steps

        print("\n" + next_steps(root, args.name, plan, committed=args.commit, like=args.like), file=sys.stderr)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from omnitts.scaffold.check import check_model, format_report

    root = _resolve_target(args.target, args.work_dir)
    reports = check_model(detect_profile(root), args.name)
    print("\n\n".join(format_report(r) for r in reports))
    return 0 if all(r.complete for r in reports) else 1


def cmd_remove(args: argparse.Namespace) -> int:
    from omnitts.scaffold.remove import plan_remove

    root = Path(args.target).resolve()
    with _writing(root):
        profile = detect_profile(root)
        plan = plan_remove(profile, args.name, force=args.force)
        nothing = f"nothing to do: {args.name} is not integrated in {root}"
        _finish(plan, root, profile, dry_run=args.dry_run, nothing=nothing)
    return 0


def cmd_resolve(args: argparse.Namespace) -> int:
    from omnitts.scaffold import resolve

    if args.install:
        root = Path(args.target).resolve()
        for line in resolve.install_driver(root):
            print(line)
        print(f"merge driver '{resolve.DRIVER}' registered in {root}/.git (config + info/attributes)", file=sys.stderr)
        return 0
    if args.files:
        if len(args.files) != 3:
            raise ScaffoldError("resolve takes BASE OURS THEIRS (git's %O %A %B) or no file at all")
        base, ours, theirs = (Path(f) for f in args.files)
        code = resolve.resolve_files(base, ours, theirs, args.path)
        if code:
            print(
                f"omnitts-scaffold: {args.path or ours}: conflicts that change existing lines remain", file=sys.stderr
            )
        return code
    root = Path(args.target).resolve()
    results = resolve.resolve_repo(root)
    if not results:
        print(f"nothing to resolve in {root}", file=sys.stderr)
        return 0
    for rel, outcome in results:
        print(f"{rel}: {outcome}")
    return 0 if all(outcome.startswith("resolved") for _, outcome in results) else 1


def cmd_clean(args: argparse.Namespace) -> int:
    result = releases.clean_work_dir(args.work_dir, modified=args.all, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for path in result.removed:
        print(path)
    for path in result.kept:
        print(f"kept {path}: a scaffold run wrote into it (--all removes it)", file=sys.stderr)
    mib = result.freed_bytes / 2**20
    print(
        f"{verb} {len(result.removed)} working copies ({mib:.0f} MiB) in {releases.work_root(args.work_dir)}",
        file=sys.stderr,
    )
    return 0


_command_line = "omnitts-scaffold"  # named in the journal, for the run that may have to roll it back


def _settle_journal(args: argparse.Namespace) -> None:
    """Before anything else, finish or roll back a transaction an interrupted run left in the target tree."""
    from omnitts.scaffold import journal

    target = getattr(args, "target", None)
    if target is None or releases.parse_spec(target) is not None:
        return  # a pypi: target is a fresh working copy
    line = journal.recover(Path(target).resolve())
    if line:
        print(f"omnitts-scaffold: {line}", file=sys.stderr)


COMMANDS = {"new": cmd_new, "check": cmd_check, "remove": cmd_remove, "resolve": cmd_resolve, "clean": cmd_clean}


@quiet_on_closed_pipe
def main(argv: list[str] | None = None) -> int:
    global _command_line
    args = _parser().parse_args(argv)
    _command_line = " ".join(["omnitts-scaffold", *(sys.argv[1:] if argv is None else argv)])
    try:
        code = _main(args)
        if code == 0:
            _FRESH_COPIES.clear()  # kept: the run worked in it
        else:
            _drop_fresh_copies()
        return code
    except BaseException:
        _drop_fresh_copies()
        raise


def _main(args: argparse.Namespace) -> int:
    try:
        _settle_journal(args)
        return COMMANDS[args.command](args)
    except ScaffoldError as exc:
        print(f"omnitts-scaffold: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader closed stdout (`| head`): not an internal error
        raise
    except Exception as exc:  # fail closed: an internal error is a failure with its one-line cause
        print(f"omnitts-scaffold: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        if os.environ.get("OMNITTS_DEBUG"):
            raise
        return 3


if __name__ == "__main__":
    sys.exit(main())
