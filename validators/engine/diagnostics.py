"""The probe report's diagnostics sections: where a stream replays, which seams click, whose audio leaked into a
request, what the audio gates measured, what the aborts left: each row with its times in seconds, the request's text
and the WAV to open. Built from the verdicts' metrics (``report.json``), so a person acts on the same facts the
checks judged."""

from __future__ import annotations

from omnitts.validators import checkids


def _cell(value) -> str:
    """A table cell: one line, ``|`` escaped, backticks dropped (the texts are requests', not Markdown)."""
    return " ".join(str(value if value is not None else "").split()).replace("|", "\\|").replace("`", "'")


def _text(row: dict) -> str:
    return _cell(repr(row["text"])) if row.get("text") else _cell(row.get("request"))


def _wav(report: dict, key: str | None, request: str | None = None) -> str:
    """The WAV a verdict wrote under ``key`` (folder/name), else the request's own audio; a verdict writes the WAVs
    of the findings its message shows, so a row beyond them says so instead of an empty cell."""
    wavs = report.get("wavs") or {}
    path = wavs.get(key or "") or wavs.get(f"request/{request}")
    return f"`{path}`" if path else "(not written: the message shows the first findings)"


def _details(report: dict, check: str) -> dict:
    found = next((r for r in report["results"] if r["check"] == check), None)
    return (found or {}).get("details") or {}


def sections(report: dict) -> list[str]:
    lines: list[str] = []
    replays = _details(report, checkids.I1_NO_REPLAY).get("replays") or []
    if replays:
        lines += [
            "",
            "## Replays (audio the stream had already played)",
            "",
            "| request (text) | replayed from s | to s | first heard at s | streamed piece | samples | open |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in replays:
            lines.append(
                f"| {_text(r)} | {r['start_s']} | {r['end_s']} | {r['source_s']} | {_cell(r.get('piece'))} | "
                f"{r['samples']} | {_wav(report, r.get('wav'))} |"
            )
    seams = _details(report, checkids.I1_SEAMS)
    if seams.get("flagged_seams"):
        lines += [
            "",
            f"## Seams that stand out ({seams['flagged']} of {seams['seams']}; limit {seams['limit']:.0%})",
            "",
            "Energy: the audio just around the seam against the audio further around it (a dip < 0, a burst > 0); "
            "step: the waveform's jump over its median step there.",
            "",
            "| request (text) | at s | streamed piece | energy dB | step | open |",
            "|---|---|---|---|---|---|",
        ]
        for r in seams["flagged_seams"][:40]:
            lines.append(
                f"| {_text(r)} | {r['time_s']} | {r['piece']} | {r['energy_db']:+.1f} | {r['jump']:.1f} | "
                f"{_wav(report, r.get('wav'))} |"
            )
    heard = [
        (check, row)
        for check in (checkids.I4_CONCURRENCY, checkids.I4_SEED_DETERMINISM)
        for row in _details(report, check).get("attributions") or []
    ]
    if heard:
        lines += [
            "",
            "## Whose audio a request received (concurrency, fixed seed)",
            "",
            "| check | round | request (text) | what its audio is, by cross-correlation | open |",
            "|---|---|---|---|---|",
        ]
        for check, r in heard:
            said = "; ".join(r.get("heard") or [])
            lines.append(
                f"| `{check}` | {_cell(r['round'])} | {_text(r)} | {_cell(said)} | {_wav(report, r.get('wav'))} |"
            )
    gates = _details(report, checkids.AUDIO_GATES)
    if gates.get("requests"):
        limits = gates.get("limits") or {}
        band = limits.get("seconds_per_char") or ["", ""]
        lines += [
            "",
            "## Audio gates (weight-free)",
            "",
            f"Warning limits (calibrated: `{_cell(gates.get('calibration'))}`): silence <= "
            f"{limits.get('silence_ratio')}, clipping <= {limits.get('clipping_ratio')}, |DC| <= "
            f"{limits.get('dc_offset')}, {band[0]}..{band[1]} s per character. Errors: silence >= 99%, a constant "
            "signal, clipping >= 50%, a duration per character 10x outside the band.",
            "",
            "| request (text) | duration s | s / char | silence | clipping | DC | peak | open |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in gates["requests"]:
            lines.append(
                f"| {_text(r)} | {r['duration_s']} | {_cell(r.get('seconds_per_char'))} | {r['silence_ratio']:.1%} | "
                f"{r['clipping_ratio']:.2%} | {r['dc_offset']:+.3f} | {r['peak']:.3f} | "
                f"{_wav(report, r.get('wav'), r.get('request'))} |"
            )
    aborts = _details(report, checkids.I5_ABORT_RECOVERY)
    if aborts.get("aborts"):
        lines += [
            "",
            f"## Aborts ({aborts['aborts']} disconnects, {aborts['interrupted']} mid-stream)",
            "",
            f"Offsets: {_cell(', '.join(aborts.get('offsets') or []))}; audio pieces received before leaving: "
            f"{aborts.get('received')}.",
            "",
            "| worker | held tensors (bytes, vs baseline) | resident memory (bytes, vs baseline) | CUDA (bytes) |",
            "|---|---|---|---|",
        ]
        for m in aborts.get("worker_memory") or []:
            lines.append(
                f"| {m['worker']} | {m['held_growth']:+d} | {m['rss_growth']:+d} | {_cell(m.get('cuda_growth'))} |"
            )
        if aborts.get("left") or aborts.get("grew"):
            # the entries to free: where the model keeps per-request state that an abort never reached
            lines += [
                "",
                "What still holds an aborted request (free it where the engine reports the request finished or "
                "aborted):",
                "",
                "| worker | container and entry |",
                "|---|---|",
            ]
            lines += [f"| {r['worker']} | {_cell(r['entry'])} |" for r in aborts.get("left") or []]
            lines += [f"| | grew: {_cell(g)} |" for g in aborts.get("grew") or []]
    return lines


FENCE = "`" * 3


def failures(report: dict) -> list[str]:
    """Each failed check's whole message, one finding a line (the overview table shows its first line)."""
    lines: list[str] = []
    failed = [r for r in report["results"] if not r["passed"] and r.get("outcome") != "not applicable"]
    if failed:
        lines += ["", "## What failed, in full", ""]
        for r in failed:
            said = r["message"].replace(FENCE, "'''")
            lines += [f"### `{r['check']}` ({r['step']})", "", f"{FENCE}text", said, FENCE, ""]
    return lines
