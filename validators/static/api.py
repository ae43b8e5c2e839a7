"""Programmatic entry points (the pytest plugin and the scaffold call these) and the one
orchestration both they and the CLI share: discover -> file rules (cached, parallel) -> tree rules."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

from omnitts.knowledge.treefacts import PKG, TreeContext, facts_for, find_model_root, find_root
from omnitts.validators.static import linter
from omnitts.validators.static.baseline import Coverage
from omnitts.validators.static.finding import Finding
from omnitts.validators.static.linter import LintResult, UsageError


class LintError(RuntimeError):
    """The lint could not check everything it was asked to (fail closed)."""


def _tree_digest(ctx: TreeContext) -> str:
    """Hash of every input the tree-scope rules read (configs, pipelines, consolidation, examples)."""
    from omnitts.knowledge import configs
    from omnitts.knowledge import treefacts as tf

    h = hashlib.blake2b(digest_size=12)
    rels = list(configs.config_files(ctx)) + [
        ctx.rel(p) for p in sorted((ctx.root / ctx.dir("models")).glob("*/pipeline.py"))
    ]
    rels += list(tf.CONSOLIDATION_FILES)
    rels += [ctx.rel(p) for p in sorted((ctx.root / ctx.dir("stage_input_processors")).glob("*.py"))]
    for rel in rels:
        h.update(rel.encode())
        h.update(ctx.read(rel).encode())
    for base in (
        tf.EXAMPLES_OFFLINE,
        tf.EXAMPLES_ONLINE,
        tf.TTS_ADAPTERS,
        tf.TREE_MODELS,
    ):
        d = ctx.root / base
        if d.is_dir():
            for p in sorted(d.iterdir()):
                h.update(p.name.encode())
                if p.is_dir() and p.name == tf.TTS_HUB:
                    for q in sorted(p.glob("*/*")):
                        h.update(q.relative_to(d).as_posix().encode())
    # Model modules (OMNI-INT-001 reads a limit a model enforces in code): their stat, not their bytes.
    for p in sorted((ctx.root / ctx.dir("models")).glob("*/*.py")):
        st = p.stat()
        h.update(f"{p.parent.name}/{p.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    h.update(repr(sorted(ctx.focus) if ctx.focus is not None else None).encode())
    return h.hexdigest()


def _abs(p) -> Path:
    return Path(os.path.abspath(p))


def _covers_tree(paths: list[Path], root: Path) -> bool:
    return any(_abs(p) in (root, root / PKG) for p in paths)


def run(
    paths: Iterable[str | os.PathLike],
    *,
    select: Iterable[str] | None = None,
    root: str | os.PathLike | None = None,
    integration: bool = False,
    jobs: int = 1,
    use_cache: bool = False,
    focus: set[str] | None = None,
    changed: list[str] | None = None,
    keep_going: bool = False,
) -> LintResult:
    """``changed``: the files a commit changes (the integration hook): the tree-scope rules then report
    only findings that involve the models those files touch, and no per-file rule runs.
    ``keep_going``: a path that does not exist is recorded in ``missing`` (the CLI reports it and
    exits 2 after linting the rest) instead of raising UsageError before anything runs."""
    select = [s for s in select] if select else None
    if changed is not None:
        return _run_changed(changed, select=select, root=root, use_cache=use_cache)
    loaded: list = []

    def rules():
        # Rule modules are imported only when some file (or the tree) misses the cache.
        if not loaded:
            loaded.append(linter.select_rules(select))
        return loaded[0]

    paths = [Path(p) for p in paths]
    tree_only = False
    if not paths:
        if not integration:
            raise UsageError("no paths given")
        # The integration hook without paths: the tree-scope checks only (configs, examples,
        # consolidation); per-file rules belong to the per-file hook.
        paths, tree_only = [Path.cwd()], True
    missing = [str(p) for p in paths if not os.path.lexists(p)]  # a dangling symlink is an input (unreadable)
    if missing and (not keep_going or len(missing) == len(paths)):
        raise UsageError(f"no such file or directory: {missing[0]}")
    paths = [p for p in paths if str(p) not in missing]
    start = Path(root) if root else paths[0]
    tree_root = find_root(start)
    # Outside a vLLM-Omni tree, a standalone model root (models/ + deploy/) still gets the config rules.
    model_root = find_model_root(start) if tree_root is None else None
    base = _abs(root) if root else (tree_root or model_root)
    facts = facts_for(tree_root)
    files = [] if tree_only else linter.discover(paths)
    items = linter.read_items(files, base)

    cache = None
    if use_cache:
        from omnitts.validators.static.cache import Cache

        sel = ",".join(sorted(select)) if select else "ALL"
        key = hashlib.blake2b(f"{linter.rules_version()}|{sel}|{facts.key()}".encode(), digest_size=10).hexdigest()
        cache = Cache(key)
    # Tree-scope rules: the whole tree (integration hook, full scans) or the config files named.
    # They run in this process while the workers lint the files.
    yaml_items = {it.rel for it in items if it.rel.endswith((".yaml", ".yml"))}
    ctx_root = tree_root or model_root
    if integration and ctx_root is None:
        raise UsageError(
            f"--integration: no vLLM-Omni tree (a directory holding {PKG}/__init__.py) or model root "
            f"(models/ + deploy/) at or above {paths[0]}"
        )
    tree_results: list[LintResult] = []
    background = None
    if ctx_root is not None:
        if integration or _covers_tree(paths, ctx_root) or focus is not None:
            tfocus = focus
        elif yaml_items:
            tfocus = yaml_items
        else:
            tfocus = set()
        if tfocus != set():
            ctx = TreeContext(ctx_root, facts, frozenset(tfocus) if tfocus is not None else None)

            def background():
                tree_results.append(_tree_rules_cached(ctx, rules, cache))

    res = linter.run_file_rules(items, facts, rules, jobs, cache, background=background)
    res.missing = missing
    res.tree_ran = bool(tree_results)
    # How many rules the run applies, for the summary line; a warm run imports no rule module, so the
    # count travels in the cache (its key already fixes the selection).
    if loaded:
        res.rules = len(loaded[0])
        if cache is not None and cache.entries.get("meta:rules") != res.rules:
            cache.entries["meta:rules"] = res.rules
            cache.dirty = True
    elif cache is not None:
        res.rules = cache.entries.get("meta:rules") or 0
    for tres in tree_results:
        res.findings.extend(tres.findings)
        res.errors.extend(tres.errors)
    if cache is not None:
        cache.save()
    res.findings = sorted(set(res.findings), key=Finding.sort_key)
    res.coverage = Coverage(
        files=None if tree_only else frozenset(_abs(it.path) for it in items),
        tree_root=_abs(ctx_root) if background is not None else None,
        tree_focus=(frozenset(tfocus) if tfocus is not None else None) if background is not None else None,
        select=select,
    )
    return res


def _run_changed(changed: list[str], *, select, root, use_cache: bool) -> LintResult:
    """The integration hook: tree-scope rules on the models the changed files touch."""
    from omnitts.validators.static import changes

    start = Path(root) if root else Path.cwd()
    tree_root = find_root(start) or find_model_root(start)
    if tree_root is None:
        raise UsageError(
            f"--changed: no vLLM-Omni tree (a directory holding {PKG}/__init__.py) or model root at or above {start}"
        )
    tree_root = _abs(tree_root)
    if not changed:
        try:
            changed = [str(tree_root / rel) for rel in changes.staged_files(tree_root)]
        except (OSError, RuntimeError) as exc:
            raise UsageError(f"--changed without files needs git's staged files: {exc}") from exc
    ctx = TreeContext(tree_root, facts_for(find_root(tree_root)))
    models, focus = changes.change_focus(ctx, changes.relative_to_root(changed, tree_root))
    res = run([], select=select, root=tree_root, integration=True, use_cache=use_cache, focus=focus)
    res.notices.append(
        f"integration checks for {len(changed)} changed file(s): "
        + (f"model(s) {', '.join(sorted(models))}" if models else "no model touched")
    )
    res.files = 0
    res.coverage = Coverage(files=None, tree_root=tree_root, tree_focus=frozenset(focus), select=select)
    return res


def _tree_rules_cached(ctx: TreeContext, rules, cache) -> LintResult:
    """Tree-scope rules, cached by a digest of every tree input they read."""
    if cache is None:
        return linter.run_tree_rules(ctx, [r for r in rules() if r.scope == "tree"])
    key = f"tree:{ctx.root}"
    digest = _tree_digest(ctx)
    hit = cache.entries.get(key)
    if hit is not None and hit[0] == digest and len(hit) == 3:
        return LintResult(findings=list(hit[1]), errors=list(hit[2]))
    res = linter.run_tree_rules(ctx, [r for r in rules() if r.scope == "tree"])
    if not res.errors:
        cache.entries[key] = (digest, res.findings, [])
        cache.dirty = True
    return res


def lint_paths(paths, *, select=None, root=None) -> list[Finding]:
    """Findings for files/directories (per-file rules; tree rules when a whole tree or its configs
    are named). Raises LintError when anything could not be checked."""
    res = run(paths, select=select, root=root)
    if res.errors or any(f.rule == "OMNI-META-004" for f in res.findings):
        raise LintError("; ".join(res.errors) or "internal error while linting (see OMNI-META-004 findings)")
    return res.findings


def model_focus(model_dir: Path, tree_root: Path) -> set[str]:
    """Tree files that belong to one model package: its pipeline's deploy/stage configs, its example
    folders and READMEs, the consolidation modules."""
    from omnitts.knowledge import configs
    from omnitts.knowledge import treefacts as tf

    name = model_dir.name
    ctx = TreeContext(tree_root, facts_for(tree_root))
    focus = set(tf.CONSOLIDATION_FILES)
    pipe_rel = _abs(model_dir / "pipeline.py")
    types = {name}
    if pipe_rel.is_file() and pipe_rel.is_relative_to(tree_root):
        for p in configs.parse_pipelines(ctx, ctx.rel(pipe_rel)):
            types.add(p.model_type)
            focus.add(p.path)
    for rel in configs.config_files(ctx):
        stem = Path(rel).stem
        if any(stem == t or stem.startswith(t + "_") for t in types):
            focus.add(rel)
    for base in (tf.EXAMPLES_OFFLINE, tf.EXAMPLES_ONLINE):
        focus.add(f"{base}/{name}")
        for readme in (tree_root / base / tf.TTS_HUB / name).glob("README*.md"):
            focus.add(ctx.rel(readme))
    return focus


def lint_model_package(model_dir, *, tree_root=None) -> list[Finding]:
    """Findings for one model package: every per-file rule on its files (and its stage input
    processor), plus the tree rules for its configs and examples when it sits in (or is checked
    against) a vLLM-Omni tree."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise UsageError(f"model package {model_dir} is not a directory")
    tree = _abs(tree_root) if tree_root else (find_root(model_dir) or find_model_root(model_dir))
    paths = [model_dir]
    if tree is not None:
        ctx = TreeContext(tree, facts_for(None))
        proc = tree / ctx.dir("stage_input_processors") / f"{model_dir.name}.py"
        if proc.is_file():
            paths.append(proc)
    focus = model_focus(_abs(model_dir), tree) if tree is not None else None
    res = run(paths, root=tree, focus=focus)
    if res.errors or any(f.rule == "OMNI-META-004" for f in res.findings):
        raise LintError("; ".join(res.errors) or "internal error while linting (see OMNI-META-004 findings)")
    return res.findings


__all__ = ["LintError", "UsageError", "lint_model_package", "lint_paths", "run"]
