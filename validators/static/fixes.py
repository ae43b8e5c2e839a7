"""Autofixes, applied with libcst (the rewrite keeps comments and formatting; read-only checks stay on
`ast`). Only provably safe rewrites live here; each is keyed by the fix id a rule puts on a finding."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from omnitts.validators.static.finding import Finding


def _fill_item_to_copy(positions: set[tuple[int, int]]):
    import libcst as cst
    from libcst.metadata import PositionProvider

    class FillItemToCopy(cst.CSTTransformer):
        """`dst.fill_(src.item())` -> `dst.copy_(src)`: same write, no host round-trip."""

        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self) -> None:
            super().__init__()
            self.applied = 0

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            pos = self.get_metadata(PositionProvider, original).start
            if (pos.line, pos.column + 1) not in positions:
                return updated
            func = updated.func
            if not (isinstance(func, cst.Attribute) and func.attr.value == "fill_" and len(updated.args) == 1):
                return updated
            inner = updated.args[0].value
            if not (
                isinstance(inner, cst.Call)
                and isinstance(inner.func, cst.Attribute)
                and inner.func.attr.value == "item"
                and not inner.args
            ):
                return updated
            self.applied += 1
            return updated.with_changes(
                func=func.with_changes(attr=cst.Name("copy_")),
                args=[updated.args[0].with_changes(value=inner.func.value)],
            )

    return FillItemToCopy()


FIXERS = {"fill_item_to_copy": _fill_item_to_copy}


def fix_source(source: str, findings: list[Finding]) -> tuple[str, int]:
    """Apply every fixable finding of one file; returns (new source, number of rewrites)."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    by_fix: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for f in findings:
        if f.fix in FIXERS:
            by_fix[f.fix].add((f.line, f.col))
    applied = 0
    for fix_id, positions in by_fix.items():
        module = cst.parse_module(source)
        transformer = FIXERS[fix_id](positions)
        source = MetadataWrapper(module).visit(transformer).code
        applied += transformer.applied
    return source, applied


def apply_fixes(findings: list[Finding]) -> tuple[int, list[Finding]]:
    """Rewrite files in place; returns (rewrites, findings that had no fix or could not be fixed)."""
    by_path: dict[str, list[Finding]] = defaultdict(list)
    rest = []
    for f in findings:
        (by_path[f.path] if f.fix else rest).append(f)
    total = 0
    for path, group in by_path.items():
        p = Path(path)
        src = p.read_text(encoding="utf-8")
        new, n = fix_source(src, group)
        if n:
            p.write_text(new, encoding="utf-8")
        total += n
        if n < len(group):
            rest.extend(group)  # not rewritten: still reported
    return total, rest
