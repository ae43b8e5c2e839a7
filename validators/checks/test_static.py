"""Static checks of the same model package, in the same pytest run; fails closed when they are missing."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest

from omnitts.validators import checkids

pytestmark = pytest.mark.usefixtures("omnitts_model")


def _call(fn, **avail):
    params = inspect.signature(fn).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return fn(**avail)
    args = {k: v for k, v in avail.items() if k in params}
    missing = [
        n
        for n, p in params.items()
        if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n not in args
    ]
    if missing:
        raise TypeError(f"{fn.__qualname__}{inspect.signature(fn)}: cannot supply {missing}")
    return fn(**args)


@pytest.mark.omnitts_check(checkids.STATIC_LINT)
def test_static_checks(ctx, record):
    try:
        api = importlib.import_module("omnitts.validators.static.api")
    except ModuleNotFoundError as exc:
        pytest.fail(
            f"static checks unavailable: {exc.name} is missing, so the static half of the validation did not "
            "run (fail closed; install omnitts with its static validators)",
            pytrace=False,
        )
    sub = ctx.subject
    files = [Path(p) for p in sub.source_files]
    tree_root = Path(sub.extra["root"]) if sub.kind == "tree" else None
    stage0 = sub.stages[0].cls
    pkg = Path(inspect.getfile(stage0)).resolve().parent if stage0 is not None else None
    if pkg is None:
        pytest.fail(f"static checks: cannot locate the model package of {sub.name}", pytrace=False)
    avail = {
        "model_dir": pkg,
        "package": pkg,
        "package_dir": pkg,
        "path": pkg,
        "name": sub.name,
        "model": sub.name,
        "tree_root": tree_root,
        "root": tree_root,
        "paths": files or [pkg],
        "files": files,
    }
    try:
        if hasattr(api, "lint_model_package"):
            result = _call(api.lint_model_package, **avail)
        elif hasattr(api, "lint_paths"):
            result = _call(api.lint_paths, **avail)
        else:
            pytest.fail("omnitts.validators.static.api has neither lint_model_package nor lint_paths", pytrace=False)
    except Exception as exc:  # noqa: BLE001 - the static half failed: fail closed with its message
        pytest.fail(f"static checks could not run on {pkg} (fail closed): {type(exc).__name__}: {exc}", pytrace=False)
    findings = list(getattr(result, "findings", result) or [])
    errors = list(getattr(result, "errors", []) or [])
    bad = [f for f in findings if getattr(f, "severity", "error") == "error"]
    # ticks: each static invariant, and each deploy-config rule when the model has a deploy config to judge
    fired = {f.rule for f in bad} | {getattr(f, "invariant", "") for f in bad}
    extra = {tick: "failed" if inv in fired else "passed" for inv, tick in checkids.STATIC_INVARIANT_TICKS.items()}
    if sub.extra.get("deploy"):
        extra.update({rule: "failed" if rule in fired else "passed" for rule in checkids.DEPLOY_RULES})
    rules = sorted({f.rule for f in bad})
    record(
        findings=len(findings),
        errors=len(bad),
        rules=rules,
        internal_errors=errors[:5],
        package=str(pkg),
        extra_checks=extra,
    )
    if errors:
        pytest.fail(
            "static checks failed internally (fail closed):\n  " + "\n  ".join(map(str, errors[:10])), pytrace=False
        )
    if bad:
        lines = [f"{f.path}:{f.line} {f.rule} [{getattr(f, 'invariant', '')}] {f.message}" for f in bad[:15]]
        pytest.fail(f"static checks: {len(bad)} error findings:\n  " + "\n  ".join(lines), pytrace=False)
