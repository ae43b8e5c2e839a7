"""Output formats: text, JSON (a list of objects), GitHub workflow annotations, SARIF 2.1.0."""

from __future__ import annotations

import json

from omnitts.validators.static.finding import Finding

FORMATS = ("text", "json", "github", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
TOOL_URI = "https://github.com/omnitts/omnitts/blob/main/docs/rules.md"


def render(findings: list[Finding], fmt: str, rules: dict | None = None) -> str:
    if fmt == "text":
        return text(findings)
    if fmt == "json":
        return json.dumps([f.to_dict() for f in findings], indent=2) + "\n"
    if fmt == "github":
        return github(findings)
    if fmt == "sarif":
        return json.dumps(sarif(findings, rules or {}), indent=2) + "\n"
    raise ValueError(f"unknown format {fmt!r}")


def text(findings: list[Finding]) -> str:
    lines = [f"{f.path}:{f.line}:{f.col}: {f.rule} [{f.severity}] {f.message}" for f in findings]
    return "\n".join(lines) + ("\n" if lines else "")


def _gh_escape(s: str, prop: bool = False) -> str:
    s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return s.replace(":", "%3A").replace(",", "%2C") if prop else s


def github(findings: list[Finding]) -> str:
    out = []
    for f in findings:
        level = "error" if f.severity == "error" else "warning"
        out.append(
            f"::{level} file={_gh_escape(f.path, True)},line={f.line},col={f.col},"
            f"title={_gh_escape(f.rule, True)}::{_gh_escape(f.message)}"
        )
    return "\n".join(out) + ("\n" if out else "")


def sarif(findings: list[Finding], rules: dict) -> dict:
    used = sorted({f.rule for f in findings} | set(rules))
    index = {rid: i for i, rid in enumerate(used)}
    descriptors = []
    for rid in used:
        cls = rules.get(rid)
        parts = cls.doc_parts() if cls else {"what": rid, "why": "", "fix": ""}
        descriptors.append(
            {
                "id": rid,
                "name": getattr(cls, "name", rid) or rid,
                "shortDescription": {"text": cls.summary() if cls else rid},
                "fullDescription": {"text": parts["what"]},
                "help": {
                    "text": f"Why: {parts['why']}\nFix: {parts['fix']}",
                    "markdown": f"**Why:** {parts['why']}\n\n**Fix:** {parts['fix']}",
                },
                "helpUri": f"{TOOL_URI}#{rid.lower()}",
                "defaultConfiguration": {
                    "level": "error" if getattr(cls, "severity", "error") == "error" else "warning"
                },
                "properties": {"invariant": getattr(cls, "invariant", "")},
            }
        )
    results = []
    for f in findings:
        results.append(
            {
                "ruleId": f.rule,
                "ruleIndex": index[f.rule],
                "level": "error" if f.severity == "error" else "warning",
                "message": {"text": f.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": f.path.replace("\\", "/")},
                            "region": {"startLine": max(1, f.line), "startColumn": max(1, f.col)},
                        },
                        "logicalLocations": [{"fullyQualifiedName": f.symbol}],
                    }
                ],
                # The baseline fingerprint (no line numbers): lets code scanning track findings across moves.
                "partialFingerprints": {"omnittsFingerprint/v1": "|".join(f.fingerprint)},
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "omnitts-lint",
                        "informationUri": TOOL_URI,
                        "version": "0.1.0",
                        "rules": descriptors,
                    }
                },
                "results": results,
            }
        ],
    }
