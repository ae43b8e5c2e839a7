"""The results folder: one folder per run, the checklist merged over the tiers, and results that survive a dead run.

Layout under the results folder (``--omnitts-out``, default ``./omnitts-out``)::

    checklist.md, checklist.json        every tier's latest verdict per model, side by side (merged)
    <tier>-<YYYYmmdd-HHMMSS>/           one run: results.json, checklist.md/json, wav/, engine/ (the engine's logs)

A run writes only into its own folder, then rewrites the merged checklist from the latest run of each tier and model,
so an engine run never wipes the harness's ticks.

The pytest process that gathers the results can itself die: a model that holds the GIL past its deadline is ended by
``faulthandler`` (:mod:`~omnitts.validators.runtime.timeouts`), and ``os._exit`` or a signal ends it without any
hook running. So the gathering process journals every event it sees (``.journal.jsonl`` in the run folder) and a
small watcher process (``python -m omnitts.validators.runtime.results watch RUN``, started by the plugin) waits for
it: on a normal end the plugin tells the watcher so; if the process dies first, the watcher rebuilds the outcomes from
the journal, fails the check that was running with the stacks ``faulthandler`` wrote, writes the results and prints
where they are.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from omnitts.validators.runtime import checklist
from omnitts.validators.runtime.outcomes import FAILED, NOT_RUN, Outcomes

JOURNAL = ".journal.jsonl"
STACKS = "stacks"  # one file per check process: faulthandler's dump when the process was ended
RESULTS = "results.json"
TIME_FORMAT = "%Y%m%d-%H%M%S"


# -- run folders ------------------------------------------------------------------------------------------------


def reserve_run_dir(out: Path, tier: str, now: float | None = None) -> Path:
    """Create and return ``out/<tier>-<time>`` (``-2``, ``-3``... when a run of the same second has it)."""
    stamp = time.strftime(TIME_FORMAT, time.localtime(now))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = out / (f"{tier}-{stamp}" if n == 1 else f"{tier}-{stamp}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"{out}: no free run folder name for {tier}-{stamp}")


def engine_dir(run_dir: Path, model: str) -> Path:
    """Where the engine tier keeps one model's environment overlay, outputs and logs in this run's folder."""
    from omnitts.validators.runtime.audio import safe_name

    path = Path(run_dir) / "engine" / safe_name(model)
    path.mkdir(parents=True, exist_ok=True)
    return path


def runs(out: Path) -> list[tuple[Path, dict]]:
    """Every finished run under ``out`` with its results, oldest first."""
    found = []
    for path in Path(out).glob(f"*/{RESULTS}"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("tier") and isinstance(data.get("models"), dict):
            found.append((path.parent, data))
    return sorted(found, key=lambda r: (str(r[1].get("generated", "")), r[0].name))


def latest_run(out: Path, tier: str | None = None) -> Path | None:
    """The newest run folder under ``out`` (of ``tier``), or None."""
    matching = [p for p, data in runs(out) if tier is None or data["tier"] == tier]
    return matching[-1] if matching else None


# -- writing ----------------------------------------------------------------------------------------------------


def results_document(outcomes: Outcomes, meta: dict) -> tuple[dict, dict]:
    """(results.json's content, the per-model verdicts the checklist is ticked from)."""
    per_model = outcomes.per_model()
    doc = {
        **meta,
        # every collected check has an outcome, and every failure belongs to a check
        "complete": not outcomes.errors
        and not any(i["unproven"] or NOT_RUN in i["results"].values() for i in per_model.values()),
        "errors": outcomes.errors,
        "models": {
            m: {
                "pattern": i["pattern"],
                "results": i["results"],
                "metrics": i["metrics"],
                "failures": i["messages"],
                "unproven": i["unproven"],
                "ran_on": [{"worker": w, "device": d} for w, d in sorted(i.get("placement", ()))],
            }
            for m, i in sorted(per_model.items())
        },
    }
    return doc, per_model


def write_run(run_dir: Path, outcomes: Outcomes, meta: dict) -> tuple[dict, list[Path]]:
    """Write the run's results.json and checklist.md/json; returns the per-model verdicts and the paths written."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    doc, per_model = results_document(outcomes, {**meta, "run": run_dir.name})
    md, js = checklist.write(run_dir, per_model, {m: i["metrics"] for m, i in per_model.items()})
    path = run_dir / RESULTS
    path.write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")
    return per_model, [md, js, path]


def write_merged(out: Path) -> list[Path]:
    """The checklist over every tier: for each model, each tier's latest run that validated it."""
    latest: dict[str, dict[str, dict]] = {}  # model -> tier -> {run, generated, results, pattern, unproven}
    for path, data in runs(out):
        for model, info in data["models"].items():
            latest.setdefault(model, {})[data["tier"]] = {
                "run": path.name,
                "generated": data.get("generated"),
                "results": info.get("results") or {},
                "pattern": info.get("pattern"),
                "unproven": info.get("unproven") or [],
            }
    if not latest:
        return []
    return list(checklist.write_merged(Path(out), latest))


# -- the journal and the watcher ----------------------------------------------------------------------------------


class Journal:
    """Append-only JSON lines of the gathering process's events (flushed each; the OS keeps them if it dies)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - open for the whole session

    def write(self, event: dict) -> None:
        if self._file.closed:
            return
        self._file.write(json.dumps(event, default=str) + "\n")
        self._file.flush()

    def close(self, remove: bool = True) -> None:
        self._file.close()
        if remove:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


def read_journal(path: Path) -> list[dict]:
    events = []
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):  # the last line may be cut where the process died
            events.append(json.loads(line))
    return events


_BELOW_THE_CHECK = re.compile(r"[/\\](_pytest|pluggy|execnet)[/\\]|<frozen runpy>")


def readable_stacks(dump: str) -> str:
    """faulthandler's dump with each thread cut where pytest's own frames begin, and without omnitts's deadline
    thread (it only waits): what is left is where the model was."""
    blocks = []
    for block in re.split(r"\n\s*\n", dump.strip()):
        lines = block.splitlines()
        while lines and not re.match(r"(Current thread|Thread) 0x", lines[0]):
            blocks.append(lines.pop(0))  # "Timeout (0:01:22)!" (the last resort), "Fatal Python error: ..."
        if any("timeouts.py" in line and " in watchdog" in line for line in lines):
            continue
        kept = []
        for line in lines:
            if _BELOW_THE_CHECK.search(line):
                kept.append("  ... (pytest's frames)")
                break
            kept.append(line)
        blocks.append("\n".join(kept))
    return "\n\n".join(blocks)


def stacks_text(run_dir: Path, process: str | None = None) -> str:
    """What faulthandler wrote for ``process`` (an xdist worker id, or ``main``), or for every process."""
    folder = Path(run_dir) / STACKS
    files = [folder / f"{process}.txt"] if process else sorted(folder.glob("*.txt"))
    parts = []
    for f in files:
        with contextlib.suppress(OSError):
            text = f.read_text(encoding="utf-8", errors="replace").strip()
            if text:
                parts.append(readable_stacks(text))
    return "\n\n".join(parts)


def start_watcher(run_dir: Path) -> subprocess.Popen | None:
    """The process that writes this run's results if the gathering process dies before it can (None: not started)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "omnitts.validators.runtime.results", "watch", str(run_dir), str(os.getpid())],
            stdin=subprocess.PIPE,
        )
    except OSError:
        return None


def stop_watcher(proc: subprocess.Popen | None) -> None:
    """The gathering process ended normally: the watcher exits without writing anything."""
    if proc is None:
        return
    with contextlib.suppress(OSError, ValueError):
        proc.stdin.write(b"done\n")
        proc.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _parent_finished(parent: int) -> bool:
    """Block until the parent says it is done (True) or is gone (False)."""
    fd = sys.stdin.fileno()
    seen = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            chunk = os.read(fd, 64)
            if not chunk:
                return seen.startswith(b"done")
            seen += chunk
        elif os.getppid() != parent:  # a forked grandchild may hold the pipe open: the parent's death decides
            return False


def recover(run_dir: Path) -> tuple[list[Path], str]:
    """Rebuild a dead run's results from its journal; returns the paths written and the running check's node id."""
    events = read_journal(Path(run_dir) / JOURNAL)
    session = next((e for e in events if e["kind"] == "session"), {})
    outcomes = Outcomes(session.get("models") or [])
    for event in events:
        outcomes.apply(event)
    stacks = stacks_text(run_dir)
    running = outcomes.running()
    message = "the pytest process died while this check ran (os._exit, a signal, or the last-resort stop of a hang)"
    if stacks:
        message += f"\n\n--- stacks when the process was ended (faulthandler) ---\n{stacks}"
    if running is not None:
        outcomes.apply(
            {"kind": "report", "nodeid": running.nodeid, "when": "???", "outcome": FAILED, "message": message}
        )
    else:
        outcomes.apply({"kind": "error", "message": "the pytest process died between checks"})
    meta = {k: v for k, v in session.items() if k not in ("kind", "models", "out")}
    meta["exit_status"] = None  # the dead process's status is not known here
    _, written = write_run(run_dir, outcomes, meta)
    if session.get("out"):
        written += write_merged(Path(session["out"]))
    with contextlib.suppress(FileNotFoundError):
        (Path(run_dir) / JOURNAL).unlink()
    return written, (running.nodeid if running is not None else "")


def watch(run_dir: Path, parent: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for pytest: it ends normally and says "done"
    if _parent_finished(parent):
        return 0
    if not (Path(run_dir) / JOURNAL).is_file():
        return 0  # nothing was journaled (the run ended before its first event, or was cleaned)
    written, nodeid = recover(run_dir)
    where = f" while running {nodeid}" if nodeid else ""
    stacks = stacks_text(run_dir)
    lines = [f"omnitts: the pytest process died{where}; its results were written by the watcher."]
    if stacks:
        lines += ["--- stacks when the process was ended (faulthandler) ---", stacks]
    lines.append("written: " + ", ".join(str(p) for p in written))
    sys.stderr.write("\n".join(lines) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 3 and args[0] == "watch":
        return watch(Path(args[1]), int(args[2]))
    sys.stderr.write("usage: python -m omnitts.validators.runtime.results watch RUN_DIR PARENT_PID\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
