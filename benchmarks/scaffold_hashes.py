"""Fingerprint of everything `omnitts-scaffold` writes: `new` (every pattern, and `--like`), `check`, `remove`,
on every supported release, as hashes of the resulting trees.

A refactor that must not change behaviour records the hashes before (`--write FILE`) and compares after
(`--compare FILE`): any difference names the release and case that changed. Runs the command line in
process against one fresh copy of each pristine release (`remove` between cases restores the copy, and
that is checked too).

Usage: python benchmarks/scaffold_hashes.py --write benchmarks/results/scaffold_hashes.json
       python benchmarks/scaffold_hashes.py --compare benchmarks/results/scaffold_hashes.json
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import shutil
import sys
import tempfile
from pathlib import Path

from omnitts.scaffold import cli
from omnitts.scaffold.naming import PATTERNS

try:  # the release cache moved into the knowledge layer; the script measures both sides of that move
    from omnitts.knowledge.releases import pristine_tree
except ImportError:
    from omnitts.knowledge.releases import pristine_tree

RELEASES = ("0.14.0", "0.16.0", "0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0")
LIKE = ("qwen3_tts", "fish_speech")  # in-tree TTS models present in every supported release


def tree_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
        digest.update(b"x" if path.stat().st_mode & 0o111 else b"-")
    return digest.hexdigest()


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def _stable(text: str, root: Path) -> str:
    return text.replace(str(root), "<root>")


def fingerprint_release(version: str, work: Path) -> dict[str, str]:
    root = work / f"vllm-omni-{version}"
    shutil.copytree(pristine_tree(version), root)
    pristine = tree_hash(root)
    result = {"pristine": pristine}
    cases = [(f"new --pattern {p}", ["--pattern", p]) for p in PATTERNS]
    cases += [(f"new --like {src}", ["--like", src]) for src in LIKE]
    for label, how in cases:
        name = "hash_" + how[1].replace("-", "_")
        code, out, err = run(["new", name, *how, "--target", str(root)])
        result[label] = f"exit {code} " + (tree_hash(root) if code == 0 else _stable(err.strip(), root))
        if code != 0:
            continue
        code, out, err = run(["check", name, "--target", str(root)])
        result[f"{label} | check"] = f"exit {code} " + hashlib.sha256(_stable(out, root).encode()).hexdigest()
        code, out, err = run(["new", name, *how, "--target", str(root)])
        result[f"{label} | again"] = f"exit {code} " + tree_hash(root)
        code, out, err = run(["remove", name, "--target", str(root)])
        after = tree_hash(root)
        result[f"{label} | remove"] = f"exit {code} " + ("restores pristine" if after == pristine else after)
    shutil.rmtree(root)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", type=Path, help="record the fingerprints in this JSON file")
    mode.add_argument("--compare", type=Path, help="compare against fingerprints recorded in this JSON file")
    parser.add_argument("--releases", nargs="*", default=list(RELEASES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="omnitts-hashes-") as tmp:
        found = {v: fingerprint_release(v, Path(tmp)) for v in args.releases}
    if args.write:
        args.write.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
        print(f"wrote {sum(len(r) for r in found.values())} fingerprints to {args.write}")
        return 0
    recorded = json.loads(args.compare.read_text())
    same = differ = 0
    for version, cases in found.items():
        for label, value in cases.items():
            before = recorded.get(version, {}).get(label)
            if before == value:
                same += 1
            else:
                differ += 1
                print(f"DIFFERS {version} {label}: before {before} after {value}")
    print(f"{same} identical, {differ} different over {len(found)} releases")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
