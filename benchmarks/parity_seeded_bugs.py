"""Seeded port bugs in vLLM-Omni 0.30.0's own Qwen3-TTS against the authors' ``qwen-tts``: does parity catch each,
and where does it place it? Which engine-tier I1/I4 check (measured on the same run) also catches it?

    OMNITTS_CACHE=... python benchmarks/parity_seeded_bugs.py [--bugs NAME,...] [--out DIR]

One capture (``omnitts-capture --reference qwen-tts --random-checkpoint``, float32, greedy), then per bug a copy
of the release tree with the bug applied (``reference_models/upstream_mutants.py``) through the real offline engine
(``validators/parity/engine_run.py``), plus the unmodified release as the control. Writes
``benchmarks/results/parity_seeded_bugs.json`` and prints the markdown table of docs/parity.md. I1 here: every
solo output has 24 kHz and a duration in (0, 60) s; I4: every batched request equals its solo run (the engine
tier's rtol 1e-3 / atol 1e-4) and the texts give distinct audio (I3 and I5 are not run: they need the worker checks).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
RELEASE, MODEL = "0.30.0", "qwen3_tts"


def _capture(work: Path) -> tuple[Path, Path]:
    from omnitts.validators.parity import cli

    ckpt, cap = work / "checkpoint", work / "capture"
    if not (cap / "manifest.json").is_file():
        args = cli._parser().parse_args(
            ["--reference", "qwen-tts", "--checkpoint", str(ckpt), "--out", str(cap), "--random-checkpoint"]
        )
        cli.capture(args)
    return ckpt, cap


def judge_parity(capture, run, ckpt) -> dict:
    """check id -> the parity verdict (``validators/verdicts/parity.py``) of the run, as ``pytest validators
    --reference`` judges it."""
    from omnitts.validators import checkids
    from omnitts.validators.observations.parity import ParityObservation
    from omnitts.validators.parity.engine import observe
    from omnitts.validators.verdicts import VERDICTS

    obs = observe(capture, run, release=RELEASE, model=MODEL, model_dir=ckpt)
    return {check: VERDICTS[check]({ParityObservation: obs}) for check in checkids.PARITY}


def _where(verdicts: dict) -> list[str]:
    """Where the divergence starts, as parity.end_to_end places it (``none``: it passed)."""
    metrics = verdicts["parity.end_to_end"].metrics
    return sorted({m["where"] for m in metrics.values() if "where" in m}) or ["none"]


def _i_checks(run, capture) -> dict:
    """I1 and I4 on the run's own solo and batched outputs (what the offline engine tier would say)."""
    rtol, atol, distinct_atol = 1e-3, 1e-4, 1e-4
    solo = {r.id: run.arrays.get(f"{r.id}/waveform") for r in capture.requests}
    i1 = all(
        v is not None and 0 < v.size / 24000 < 60 and run.result["requests"][k]["sr"] == 24000 for k, v in solo.items()
    )
    same = []
    for r in capture.requests:
        got, want = run.arrays.get(f"batch/{r.id}/waveform"), solo[r.id]
        same.append(got is not None and got.shape == want.shape and bool(np.allclose(got, want, rtol=rtol, atol=atol)))
    waves = list(solo.values())
    distinct = all(
        not (a.shape == b.shape and np.allclose(a, b, atol=distinct_atol))
        for i, a in enumerate(waves)
        for b in waves[i + 1 :]
    )
    return {"i1_duration_and_sr": i1, "i4_batch_equals_solo": all(same), "i4_distinct_texts": distinct}


def main(argv: list[str] | None = None) -> int:
    from omnitts.knowledge.releases import pristine_tree
    from omnitts.reference_models import upstream_mutants
    from omnitts.validators.engine.runtime import EngineEnv
    from omnitts.validators.parity.capture_file import read_capture
    from omnitts.validators.parity.engine import run_engine

    parser = argparse.ArgumentParser()
    parser.add_argument("--bugs", default="", help="comma-separated bug names (default: all)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "parity_seeded_bugs.json")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--no-control", action="store_true")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="omnitts-parity-bugs-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    ckpt, cap = _capture(work)
    capture = read_capture(cap)
    print(f"capture: {time.monotonic() - t0:.0f} s ({work})", flush=True)
    chosen = [upstream_mutants.bug(n) for n in args.bugs.split(",") if n] or list(upstream_mutants.BUGS)
    subjects = ([] if args.no_control else [None]) + chosen
    rows = json.loads(args.out.read_text()) if args.out.is_file() else {}
    for found in subjects:
        name = found.name if found else "release (control)"
        tree = pristine_tree(RELEASE)
        if found is not None:
            shutil.rmtree(work / f"tree-{found.name}", ignore_errors=True)  # a rerun starts from the release again
            tree = upstream_mutants.apply(tree, work / f"tree-{found.name}", found)
        env = EngineEnv.prepare(tree, RELEASE, work / f"env-{name.split()[0]}")
        run = run_engine(env, MODEL, ckpt, cap, work / f"run-{name.split()[0]}")
        row: dict = {"what": found.what if found else "vLLM-Omni 0.30.0 as released", "wall_s": round(run.wall_s)}
        if run.error and not run.arrays:
            row["error"] = run.error
        else:
            verdicts = judge_parity(capture, run, ckpt)
            failing = [v for v in verdicts.values() if not v.passed]
            row["caught"] = bool(failing)
            row["failed"] = [v.check for v in failing]
            row["where"] = _where(verdicts)
            row["first"] = failing[0].findings[0].text if failing and failing[0].findings else ""
            row["first"] = row["first"] or verdicts["parity.end_to_end"].headline.split(";")[0]
            row["expect"] = found.expect if found else "none"
            row.update(_i_checks(run, capture))
            if run.error:
                row["error"] = run.error
        rows[name] = row
        print(json.dumps({name: row}), flush=True)
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows))
    return 0


def table(rows: dict) -> str:
    lines = [
        "| seeded bug | parity catches it | failing parity checks | where | first divergence | I1 duration/sr "
        "| I4 batch == solo | I4 distinct texts |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def mark(ok_means_pass: bool | None) -> str:
        return "—" if ok_means_pass is None else ("passes" if ok_means_pass else "**catches**")

    for name, row in rows.items():
        if "caught" not in row:
            lines.append(f"| {name} | error: {row.get('error', '?')} | | | | | | |")
            continue
        first = row["first"].split(": ", 1)[-1].replace("|", "\\|")
        failed, where = ", ".join(f"`{c}`" for c in row.get("failed", ())), ", ".join(row["where"])
        lines.append(
            f"| {name}: {row['what']} | {'**yes**' if row['caught'] else 'no'} | {failed} | {where} | "
            f"{first} | {mark(row['i1_duration_and_sr'])} | {mark(row['i4_batch_equals_solo'])} | "
            f"{mark(row['i4_distinct_texts'])} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
