"""Recalibrate the limits of the audio gates (audio.gates) and of the seam check (i1.seams) from passing runs.

    python scripts/calibrate_gates.py [--results PATH ...] [--no-harness] [--write]

Each limit is the worst value the passing runs show, plus a stated margin (``MARGINS``): the silence ratio, the
clipping ratio and |DC offset| of every request, the seconds per input character (a band: half the fewest to twice
the most), and the share of seams that stand out in one run (pooled over its streams). The runs are

* the harness on the catalog's correct reference models (their solo streams, every text) unless ``--no-harness``;
* every ``results.json`` (a ``pytest validators`` run folder, an engine-tier session of
  ``benchmarks/engine_mutants.py``) and ``report.json`` (``omnitts-probe``) under the ``--results`` paths, where the
  check passed: their ``audio.gates`` rows and ``i1.seams`` share.

``--write`` rewrites ``validators/verdicts/gate_limits.py`` with the limits, the worst values and the command;
without it the table is printed only. For a real model, run the validators (or the probe) on it a few times while
it is known good, then this script with ``--results`` on those runs and ``--no-harness``.
"""

from __future__ import annotations

import argparse
import json
import pprint
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMITS_FILE = REPO / "validators" / "verdicts" / "gate_limits.py"

MARGINS = {
    "silence_ratio": "+0.25",
    "clipping_ratio": "x2 +0.01",
    "dc_offset": "+0.1",
    "seconds_per_char": "band /2 .. x2",
    "seam_fraction": "+0.25",
}


def limits_from(worst: dict) -> dict:
    """The limits the margins give for the worst values."""
    lo, hi = worst["seconds_per_char"]
    return {
        "silence_ratio": round(min(0.95, worst["silence_ratio"] + 0.25), 4),
        "clipping_ratio": round(min(0.45, 2 * worst["clipping_ratio"] + 0.01), 4),
        "dc_offset": round(worst["dc_offset"] + 0.1, 4),
        "seconds_per_char": (round(lo / 2, 4), round(hi * 2, 4)),
        "seam_fraction": round(min(0.9, worst["seam_fraction"] + 0.25), 4),
    }


def harness_runs() -> tuple[list[dict], list[float], list[str]]:
    """Gate rows and pooled seam shares of the catalog's correct models, each text streamed alone."""
    from omnitts.reference_models.catalog import REFERENCE_TEXTS, get_subject
    from omnitts.validators.verdicts.signal import gate_stats, seam_report

    rows, shares, population = [], [], []
    for model in ("ref_two_stage", "ref_single_stage", "ref_native_ar"):
        subject = get_subject(model)
        sr = int(subject.make_config().sample_rate)
        judged = flagged = 0
        for text in REFERENCE_TEXTS:
            (result,) = subject.run([text])
            audio = result.stream_audio.numpy()
            rows.append(gate_stats(audio, sr, len(text)))
            report = seam_report(audio, sr, [d.numel() for d in result.deltas])
            judged, flagged = judged + len(report.seams), flagged + len(report.flagged)
        shares.append(flagged / judged if judged else 0.0)
        population.append(f"harness {model} ({len(REFERENCE_TEXTS)} texts)")
    return rows, shares, population


def _checks_of(doc: dict) -> list[tuple[dict, dict, str]]:
    """(outcomes, metrics, what) of each model of a results.json, or of a probe report."""
    if "models" in doc:
        return [(m.get("results", {}), m.get("metrics", {}), name) for name, m in doc["models"].items()]
    if "results" in doc and isinstance(doc["results"], list):
        outcomes = {r["check"]: r.get("outcome") or ("passed" if r["passed"] else "failed") for r in doc["results"]}
        return [(outcomes, {r["check"]: r.get("details", {}) for r in doc["results"]}, f"probe {doc.get('model')}")]
    return []


def result_runs(paths: list[Path]) -> tuple[list[dict], list[float], list[str]]:
    rows, shares, population = [], [], []
    files = [f for p in paths for f in ([p] if p.is_file() else [*p.rglob("results.json"), *p.rglob("report.json")])]
    for path in sorted(set(files)):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for outcomes, metrics, what in _checks_of(doc):
            used = False
            if outcomes.get("audio.gates") == "passed":
                found = metrics.get("audio.gates", {}).get("requests") or []
                rows += found
                used = used or bool(found)
            seams = metrics.get("i1.seams", {})
            if outcomes.get("i1.seams") == "passed" and seams.get("seams"):
                shares.append(seams["flagged"] / seams["seams"])
                used = True
            if used:
                population.append(f"{path.parent} ({what})")
    return rows, shares, population


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, nargs="*", default=[], help="run folders, results.json or report.json")
    ap.add_argument("--no-harness", action="store_true", help="leave out the catalog's reference models")
    ap.add_argument("--write", action="store_true", help=f"rewrite {LIMITS_FILE.relative_to(REPO)}")
    args = ap.parse_args(argv)

    rows, shares, population = ([], [], []) if args.no_harness else harness_runs()
    more = result_runs(args.results)
    rows, shares, population = rows + more[0], shares + more[1], population + more[2]
    per_char = [r["seconds_per_char"] for r in rows if r.get("seconds_per_char")]
    if not rows or not per_char or not shares:
        print("calibrate_gates: no passing runs with gate rows and seams to calibrate from", file=sys.stderr)
        return 2
    worst = {
        "silence_ratio": max(r["silence_ratio"] for r in rows),
        "clipping_ratio": max(r["clipping_ratio"] for r in rows),
        "dc_offset": max(abs(r["dc_offset"]) for r in rows),
        "seconds_per_char": (min(per_char), max(per_char)),
        "seam_fraction": round(max(shares), 4),
    }
    limits = limits_from(worst)
    calibration = {
        "command": "python scripts/calibrate_gates.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "requests": len(rows),
        "seam_runs": len(shares),
        "population": population,
        "worst": worst,
    }
    print(f"{len(rows)} passing requests, {len(shares)} runs with seams, from {len(population)} sources")
    for key, value in worst.items():
        print(f"  {key:<18} worst {value!s:<22} margin {MARGINS[key]:<14} limit {limits[key]}")
    if args.write:
        LIMITS_FILE.write_text(render(calibration, limits))
        # the repository's formatting, so that a recalibration's diff is the numbers only
        subprocess.run([sys.executable, "-m", "ruff", "format", "-q", str(LIMITS_FILE)], check=False)
        print(f"written: {LIMITS_FILE.relative_to(REPO)}")
    return 0


def render(calibration: dict, limits: dict) -> str:
    def literal(value) -> str:
        return pprint.pformat(value, width=112, sort_dicts=False)

    return (
        '"""Limits of the audio gates (audio.gates) and of the seam check (i1.seams), calibrated from passing runs.\n\n'
        "Generated by ``python scripts/calibrate_gates.py``; rerun it to recalibrate (docs/diagnostics.md says how and "
        "on\nwhat). Each limit is the worst value the passing runs showed plus the margin of ``MARGINS``.\n"
        '"""\n\n'
        f"CALIBRATION = {literal(calibration)}\n\n"
        f"MARGINS = {literal(MARGINS)}\n\n"
        f"LIMITS = {literal(limits)}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
