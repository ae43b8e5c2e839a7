"""The harness tier's mutants at the engine tier: is each bug caught by the same check through the real engine?

    python benchmarks/engine_mutants.py [--mutants a,b,...] [--tiers harness,offline,server,probe] [--work DIR]
        [--checks K] [--no-doc]

Each subject is the single-stage pattern scaffolded into a fresh copy of the newest release with a CPU engine
(0.30.0) as ``tiny_single_stage``, then mutated: the catalog's ``ref_single_stage`` mutants
(``omnitts.reference_models.mutants``) apply unchanged to the scaffold's model file (the scaffold generates the
same generator code; only the class prefix differs), plus runtime bugs the catalog states only on other patterns
(text ignored, wrong sample rate, ``max_num_seqs: 1``). Per subject and tier, one ``pytest validators --omni-root
TREE --model tiny_single_stage [--engine offline]`` session (one engine session at a time: the machine has 2
cores); verdicts come from that session's ``results.json``.

A mutant is **caught** at a tier when one of its target checks fails there; the correct model must pass every
check of both tiers. A target check that the engine tier does not have on this branch (I5 and I3 inside the
worker) makes the row "pending worker checks". Writes ``benchmarks/results/engine_mutants.json`` and the
"Engine tier" section of ``docs/mutant_matrix.md`` (``benchmarks/mutant_matrix.py`` keeps that section).

The harness tier runs in an interpreter that has the release's vLLM (``--omni-root`` models import it): the
engine environment's site-packages are added to a small venv made under ``--work`` (``harness_python``).

Tiers: ``harness``, ``offline`` (``--engine offline``), ``server`` (``--engine server``) and ``probe``: the tree's
own server started as the server tier starts it (omnitts's worker extension, ``VLLM_SERVER_DEV_MODE=1``) and
``omnitts-probe --worker-rpc`` run against it. ``--checks`` is a pytest ``-k`` expression for the pytest tiers (and
the probe's checks named by it); ``--checks diagnosis`` gives each subject its own: a diagnostics mutant the checks
its row of ``DIAGNOSES`` names (with ``audio.finite``), the correct model every diagnostics check
(``DIAGNOSTIC_CHECKS``), the others their targets. The diagnostics mutants (docs/diagnostics.md) are judged by their
diagnosis too: the check that must catch each and what its message must say (``DIAGNOSES``); ``--diagnostics-doc``
gets that mutants x backends table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from omnitts.validators import checkids

REPO = Path(__file__).resolve().parents[1]
MODEL = "tiny_single_stage"
CAMEL = "TinySingleStage"
MODEL_FILE = f"vllm_omni/model_executor/models/{MODEL}/modeling_{MODEL}.py"
DEPLOY_FILE = f"vllm_omni/deploy/{MODEL}.yaml"
SECTION = "## Engine tier"


@dataclass(frozen=True)
class Subject:
    name: str
    description: str
    patches: tuple[tuple[str, str, str], ...]  # (file relative to the tree, old, new); old occurs exactly once
    targets: tuple[str, ...]  # runtime check ids that must catch it ("" for the correct model)
    catalog: str | None = None  # the harness catalog's mutant it is (docs/mutant_matrix.md, harness rows)


def _catalog(bug: str) -> Subject:
    """A ``ref_single_stage`` mutant of the catalog, re-targeted at the scaffolded model's file."""
    from omnitts.reference_models import mutants
    from omnitts.validators import checkids

    mutant = mutants.MUTANTS[f"ref_single_stage@{bug}"]
    patches = tuple(
        (
            MODEL_FILE,
            p.old.replace("RefSingleStage", CAMEL).replace("ref_single_stage", MODEL),
            p.new.replace("RefSingleStage", CAMEL).replace("ref_single_stage", MODEL),
        )
        for p in mutant.patches
    )
    targets = tuple(t for t in checkids.targets(list(mutant.checks)) if t != checkids.STATIC_LINT)
    return Subject(bug, mutant.description, patches, targets, catalog=mutant.name)


def subjects() -> list[Subject]:
    from omnitts.validators import checkids

    own = [
        Subject(
            "text-ignored",
            "Every request's prompt is replaced by a constant token: the audio depends only on the text's length.",
            (
                (
                    MODEL_FILE,
                    "            prompt = input_ids[offset : offset + span]\n",
                    "            prompt = torch.full_like(input_ids[offset : offset + span], 5)\n",
                ),
            ),
            (checkids.I4_CONCURRENCY, checkids.I1_MATCHES_REFERENCE),
        ),
        Subject(
            "wrong-sample-rate",
            "forward() reports 24000 Hz while the config (and the codec) say 16000 Hz.",
            (
                (
                    MODEL_FILE,
                    "        sr = torch.tensor(config.sample_rate, dtype=torch.int32)\n",
                    "        sr = torch.tensor(24000, dtype=torch.int32)\n",
                ),
            ),
            (checkids.I1_DURATION_AND_SR,),
        ),
        Subject(
            "max-num-seqs-1",
            "The deploy config runs one request at a time (the catalog states it on ref_two_stage).",
            ((DEPLOY_FILE, "    max_num_seqs: 4\n", "    max_num_seqs: 1\n"),),
            (checkids.I4_CONCURRENCY,),
        ),
    ]
    catalog = [_catalog(bug) for bug in ("batch-first", "const-request-key", "batch-flag", "replay")]
    pending = [_catalog(bug) for bug in ("abort-leak", "tensor-branch")]
    diagnostics = [_catalog(bug) for bug in DIAGNOSES if bug != "abort-leak"]
    return [Subject("correct", "the scaffolded model as generated", (), ()), *catalog, *own, *pending, *diagnostics]


# The diagnostics mutants (issue 23's seeded proofs): the check that must catch each, and what its message must say,
# per tier (a PCM server cannot carry NaN: the gates see what the server made of it).
_REPLAY = ((checkids.I1_NO_REPLAY, "REPLAY: stream samples"),)
DIAGNOSES: dict[str, dict[str, tuple[tuple[str, str], ...]]] = {
    "chunk-replay": {"*": _REPLAY},
    "stream-doubled": {"*": _REPLAY},
    "seam-fade": {"*": ((checkids.I1_SEAMS, "SEAM GLITCH at"),)},
    "voice-broadcast": {"*": ((checkids.I4_CONCURRENCY, "heard: samples 0.."),)},
    "seed-batch": {"*": ((checkids.I4_SEED_DETERMINISM, "SEED IGNORED IN A BATCH"),)},
    "abort-leak": {"*": ((checkids.I5_ABORT_RECOVERY, " still holds '"),)},  # "after 9 aborts: CONTAINER still holds"
    "nan-decoder": {
        "harness": ((checkids.AUDIO_FINITE, "NaN/Inf, the first at sample 0"),),
        "offline": ((checkids.AUDIO_FINITE, "NaN/Inf, the first at sample 0"),),
        "*": ((checkids.AUDIO_GATES, "SILENCE"), (checkids.AUDIO_GATES, "CONSTANT")),
    },
    "silent-decoder": {"*": ((checkids.AUDIO_GATES, "SILENCE: 100%"),)},
}


# What the correct model must pass at every tier for the diagnostics table (the checks and the two they extend).
DIAGNOSTIC_CHECKS = checkids.DIAGNOSTICS


def checks_for(subject: Subject, checks: str | None) -> str | None:
    """The -k expression of a subject's sessions: ``checks`` as given, or per subject for ``diagnosis``."""
    if checks != "diagnosis":
        return checks
    if subject.name in DIAGNOSES:
        ids = {checkids.AUDIO_FINITE} | {c for want in DIAGNOSES[subject.name].values() for c, _ in want}
    elif subject.targets:
        ids = set(subject.targets)
    else:
        ids = set(DIAGNOSTIC_CHECKS)
    return " or ".join(sorted(ids))


def harness_python(work: Path) -> Path:
    """A venv (system site-packages for pytest and omnitts's own dependencies) that also sees the engine
    environment's site-packages first, so ``--omni-root`` models import the release's vLLM."""
    from omnitts.knowledge.engine import cpu_engine_releases
    from omnitts.validators.engine.install import ensure_engine_env

    engine_py = ensure_engine_env(cpu_engine_releases()[-1])
    venv = work / "harness-venv"
    py = venv / "bin" / "python"
    if not py.is_file():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
        site = subprocess.run(
            [str(engine_py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        own = subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        # addsitedir also runs the engine site's .pth files; it lands before the system site-packages.
        (Path(own) / "omnitts_engine_site.pth").write_text(f"import site; site.addsitedir({site!r})\n")
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)], check=True)
    return py


def scaffold(base: Path) -> Path:
    """The release's pristine tree with the single-stage pattern scaffolded in (made once per work dir)."""
    from omnitts.knowledge.engine import cpu_engine_releases
    from omnitts.knowledge.releases import pristine_tree

    tree = base / "tree-base"
    if not (tree / MODEL_FILE).is_file():
        shutil.rmtree(tree, ignore_errors=True)
        shutil.copytree(pristine_tree(cpu_engine_releases()[-1]), tree)
        cmd = [sys.executable, "-m", "omnitts.scaffold.cli", "new", MODEL, "--pattern", "single-stage"]
        proc = subprocess.run([*cmd, "--target", str(tree)], capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"engine_mutants: scaffold failed: {proc.stderr.strip()[-500:]}")
    return tree


def mutate(base: Path, subject: Subject, work: Path) -> Path:
    tree = work / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(base, tree)
    for rel, old, new in subject.patches:
        path = tree / rel
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"engine_mutants: {subject.name}: the snippet occurs {text.count(old)} times in {rel}")
        path.write_text(text.replace(old, new))
    return tree


def run_tier(python: Path, tree: Path, tier: str, out: Path, timeout: float, extra: list[str] = ()) -> dict:
    """One ``pytest validators`` session on the subject; its per-check outcomes and failure messages."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = [str(python), "-m", "pytest", str(REPO / "validators"), "-p", "no:cacheprovider", "-q"]
    cmd += ["--omni-root", str(tree), "--model", MODEL, "--omnitts-out", str(out / "report")]
    cmd += ["-o", "addopts=--import-mode=importlib"]
    if tier != "harness":
        cmd += ["--engine", tier]
    cmd += list(extra)
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=out, timeout=timeout)
        rc, stdout = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, stdout = "timeout", (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
    wall = time.perf_counter() - started
    (out / "pytest.log").write_text(stdout)
    (out / "run.json").write_text(json.dumps({"rc": rc, "wall_s": round(wall, 1)}))
    return read_run(out)


def run_catalog(chosen: list[Subject], out: Path, timeout: float, checks: str | None) -> dict[str, dict]:
    """The ``catalog`` tier: one harness session (omnitts's own environment) on the catalog's twins of the chosen
    subjects (``ref_single_stage@BUG``, the mutants these subjects apply to the scaffold), and on
    ``ref_single_stage`` for the correct model; each model's outcomes and messages in ``read_run``'s form. One
    session for all: on a loaded 2-core machine, a harness session's start (imports) costs minutes."""
    names = {s.name: (s.catalog or "ref_single_stage") for s in chosen if s.catalog or not s.targets}
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    words = set()
    for s in chosen:
        expr = checks_for(s, checks)
        words |= set(re.findall(r"[a-z_.0-9]+", expr or "")) - {"or", "and", "not"}
    cmd = [sys.executable, "-m", "pytest", str(REPO / "validators"), "-p", "no:cacheprovider", "-q", "-p", "no:xdist"]
    cmd += ["--omnitts-out", str(out / "report"), "-o", "addopts=--import-mode=importlib"]
    cmd += [a for model in dict.fromkeys(names.values()) for a in ("--model", model)]
    if words and checks:
        cmd += ["-k", " or ".join(sorted(words))]
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=out, timeout=timeout)
        rc, stdout = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired:
        rc, stdout = "timeout", ""
    wall = round(time.perf_counter() - started, 1)
    (out / "pytest.log").write_text(stdout)
    from omnitts.validators.runtime.results import latest_run

    run = latest_run(out / "report")
    if run is None or not (run / "results.json").is_file():
        return {name: {"error": f"no results.json (rc {rc}): {stdout[-600:]}", "wall_s": wall} for name in names}
    models = json.loads((run / "results.json").read_text())["models"]
    summary = next((ln for ln in reversed(stdout.splitlines()) if " in " in ln and "passed" in ln), "")
    found = {}
    for name, model in names.items():
        m = models.get(model, {})
        # this subject's own checks only: the session ran every subject's on every model
        mine = (checks_for(_by_name(chosen, name), checks) or "").split(" or ")
        results = {c: o for c, o in m.get("results", {}).items() if not checks or c in mine}
        found[name] = {
            "rc": rc,
            "wall_s": wall,
            "pytest": f"{model} in one session of {len(names)} models: {summary}",
            "results": results,
            "failures": {c: f for c, f in m.get("failures", {}).items() if c in results},
        }
    (out / "run.json").write_text(json.dumps(found))
    return found


def _by_name(chosen: list[Subject], name: str) -> Subject:
    return next(s for s in chosen if s.name == name)


def run_probe(tree: Path, out: Path, timeout: float, only: str | None) -> dict:
    """The tree's own server started as the server tier starts it, ``omnitts-probe --worker-rpc`` against it; its
    per-check outcomes and messages in the form of a pytest session's (``read_run``)."""
    from omnitts.knowledge.engine import cpu_engine_releases
    from omnitts.validators.backends.workers import collective_rpc
    from omnitts.validators.engine.probe import STEPS, Probe
    from omnitts.validators.engine.session import EngineSession

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    words = set(re.findall(r"[a-z_.0-9]+", only or "")) - {"or", "and", "not"}
    checks = {c for c, _ in STEPS if only is None or any(w in c for w in words)}
    started, log = time.perf_counter(), []
    engine = EngineSession(tree, MODEL, cpu_engine_releases()[-1], out / "work", timeout)
    try:
        server = engine.start_server()
        report = Probe(
            server.url,
            str(engine.model_dir),
            out / "report",
            timeout=300,
            bad_timeout=120,
            av_python=str(engine.env.python),
            rpc=lambda method: collective_rpc(server.url, method),
        ).run(checks or None)
        rc = 0 if report["passed"] else 1
        results = {r["check"]: _probe_outcome(r) for r in report["results"]}
        failures = {r["check"]: r["message"] for r in report["results"] if r["outcome"] != "passed"}
    except Exception as exc:  # noqa: BLE001 - the tier's error is its row
        rc, results, failures = "error", {}, {}
        log.append(f"{type(exc).__name__}: {exc}")
    finally:
        engine.close()
    wall = round(time.perf_counter() - started, 1)
    said = f"{sum(v == 'failed' for v in results.values())} failed, {len(results)} checks in {wall}s"
    (out / "pytest.log").write_text("\n".join([*log, said]))
    run = {"rc": rc, "wall_s": wall, "pytest": said, "results": results, "failures": failures}
    (out / "run.json").write_text(json.dumps(run))
    if log:
        return {"error": log[0], "wall_s": wall}
    return run


def _probe_outcome(result: dict) -> str:
    return {"not applicable": "skipped"}.get(result.get("outcome", ""), result.get("outcome") or "failed")


def read_run(out: Path) -> dict | None:
    """The outcome of the session that ran in ``out`` (None when none did): per-check outcomes and messages."""
    if not (out / "pytest.log").is_file():
        return None
    stdout = (out / "pytest.log").read_text()
    meta = json.loads((out / "run.json").read_text()) if (out / "run.json").is_file() else {}
    if "results" in meta:  # the probe tier writes its outcome whole
        return meta
    rc = meta.get("rc")
    wall = meta.get("wall_s")
    if wall is None:  # a session of an earlier version of this script: pytest's own time
        found = re.search(r" in ([0-9.]+)s", stdout)
        wall = float(found.group(1)) if found else 0.0
    from omnitts.validators.runtime.results import latest_run

    run = latest_run(out / "report")  # the session's run folder under its results folder
    results_path = (run or out / "report") / "results.json"
    summary = next(
        (ln for ln in reversed(stdout.splitlines()) if " in " in ln and ("passed" in ln or "failed" in ln)), ""
    )
    if not results_path.is_file():
        return {"error": f"no results.json (rc {rc}): {stdout[-600:]}", "wall_s": round(wall, 1)}
    model = json.loads(results_path.read_text())["models"].get(MODEL, {})
    return {
        "rc": rc,
        "wall_s": round(wall, 1),
        "pytest": summary,
        "results": model.get("results", {}),
        "failures": model.get("failures", {}),
        "metrics": model.get("metrics", {}),
    }


def _headline(message: str) -> str:
    """The assertion's own lines (pytest's ``E`` lines when the message is a traceback), first two."""
    lines = (message or "").splitlines()
    asserted = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    lines = [ln.strip() for ln in (asserted or lines) if ln.strip()]
    if lines:
        lines[0] = re.sub(r"^(AssertionError|Failed): ", "", lines[0])
    return " — ".join(lines[:2])[:260]


def verdict(subject: Subject, run: dict | None) -> dict:
    """What a tier says about a subject: PASS / FAIL (correct model), CAUGHT by / MISSED / pending (mutant)."""
    if run is None:
        return {"verdict": "not run", "failed": [], "says": ""}
    if "error" in run:
        return {"verdict": "ERROR", "failed": [], "says": run["error"][:260]}
    failed = sorted(c for c, s in run["results"].items() if s == "failed")
    ran = set(run["results"])
    if not subject.targets:
        say = _headline(run["failures"].get(failed[0], "")) if failed else ""
        return {"verdict": "FAIL" if failed else "PASS", "failed": failed, "says": say}
    caught = [c for c in failed if c in subject.targets]
    if caught:
        says = _headline(run["failures"].get(caught[0], ""))
        return {"verdict": f"CAUGHT by {', '.join(caught)}", "failed": failed, "says": says}
    absent = [t for t in subject.targets if t not in ran]
    if failed:
        what = f"caught by other checks ({', '.join(failed)}), not by {', '.join(subject.targets)}"
        return {"verdict": what, "failed": failed, "says": _headline(run["failures"].get(failed[0], ""))}
    if absent and len(absent) == len(subject.targets):
        return {"verdict": f"MISSED: no check {', '.join(absent)} at this tier", "failed": [], "says": ""}
    return {"verdict": "MISSED", "failed": [], "says": ""}


def diagnosis(subject: Subject, tier: str, run: dict | None) -> dict:
    """A diagnostics mutant at one tier: CAUGHT with the diagnosis its row of DIAGNOSES names, or why not."""
    if run is None:
        return {"verdict": "not run", "says": ""}
    if "error" in run:
        return {"verdict": "ERROR", "says": run["error"][:200]}
    want = DIAGNOSES[subject.name].get({"catalog": "harness"}.get(tier, tier)) or DIAGNOSES[subject.name]["*"]
    for check, needle in want:
        message = run["failures"].get(check, "")
        if run["results"].get(check) == "failed" and needle in message:
            line = next((ln.strip() for ln in message.splitlines() if needle in ln), needle)
            return {"verdict": f"CAUGHT by {check}", "says": line[:240]}
    failed = sorted(c for c, s in run["results"].items() if s == "failed")
    return {"verdict": f"MISSED (failed: {', '.join(failed) or 'none'})", "says": ""}


def write_diagnostics_doc(doc: Path, rows: list[dict], meta: dict) -> None:
    """The mutants x backends table of docs/diagnostics.md (between its generated-table markers)."""
    tiers = ("harness", "engine", "server", "probe")
    ran = [t for t in ("catalog", "offline", "server", "probe") if any(t in r.get("tiers", ()) for r in rows)]
    lines = [
        f"Generated by `python benchmarks/engine_mutants.py --mutants {','.join(['correct', *DIAGNOSES])} --tiers "
        f"{','.join(ran) or 'catalog,offline,probe'} --checks diagnosis` ({meta['when']}; {meta['machine']}; the "
        "tiers may run as separate invocations, each merging its rows). Each cell: the check that caught the mutant "
        "at that backend and the line of its message that names the bug; the correct model: PASS when every "
        f"diagnostics check of the tier passed ({', '.join(DIAGNOSTIC_CHECKS)}). Harness: the catalog's "
        "`ref_single_stage@BUG` twins in one harness session; the engine columns: the same patch applied to the "
        "single-stage model scaffolded into vLLM-Omni 0.30.0, one session per mutant (`--checks diagnosis`: the "
        "checks its diagnosis names, and `audio.finite`).",
        "",
        "| mutant | harness | offline engine | server tier | probe (against the server tier) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if r["subject"] != "correct" and r["subject"] not in DIAGNOSES:
            continue
        cells = []
        for key in tiers:
            # a mutant's cell is its diagnosis only (a row may hold older verdicts of other checks at that tier)
            said = r.get("diagnosis", {}).get(key) if r["subject"] != "correct" else r.get(key)
            said = said or {}
            text = said.get("verdict", "not run")
            if said.get("says"):
                text += f": {said['says']}"
            results = r.get(f"{key}_run", {}).get("results", {})
            if r["subject"] == "correct" and results:
                unjudged = sorted(c for c, o in results.items() if o != "passed")
                text += f" ({len(results) - len(unjudged)} checks" + (
                    f"; not judged here: {', '.join(unjudged)})" if unjudged else ")"
                )
            cells.append(text.replace("|", "\\|"))
        lines.append(f"| `{r['subject']}` | " + " | ".join(cells) + " |")
    begin, end = "<!-- mutants x backends: begin -->", "<!-- mutants x backends: end -->"
    text = doc.read_text() if doc.is_file() else f"{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    doc.write_text(head + begin + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1])


def _pending(subject: Subject, offline: dict | None) -> bool:
    """Every target is an I5/I3 check the engine tier does not have on this branch (another engineer adds them)."""
    worker = {"i5.state_freed", "i5.no_growth", "i3.host_syncs"}
    ran = set((offline or {}).get("results", {}))
    return bool(subject.targets) and all(t in worker and t not in ran for t in subject.targets)


def write_doc(doc: Path, rows: list[dict], meta: dict) -> None:
    lines = [
        SECTION,
        "",
        f"Generated by `python benchmarks/engine_mutants.py` ({meta['when']}; {meta['machine']}; "
        f"{meta['sessions']} pytest sessions, {meta['session_wall_s']:.0f} s of session wall time in all).",
        "The single-stage pattern scaffolded into a copy of vLLM-Omni 0.30.0 as `tiny_single_stage`, mutated, then "
        "`pytest validators --omni-root TREE --model tiny_single_stage` (harness) and the same with "
        "`--engine offline` (the tree's own `Omni` on CPU), `--engine server` (the tree's own server) and "
        "`omnitts-probe --worker-rpc` against that server. Catalog mutants are the `ref_single_stage` ones of "
        "the harness rows above, applied unchanged to the scaffold's model file; the others are stated here "
        "(`benchmarks/engine_mutants.py`). *Caught* = one of the target checks fails at that tier; *not run*: that "
        "tier did not run on the subject in this table's sessions. The diagnostics mutants, with the diagnosis each "
        "cell must say, are in docs/diagnostics.md.",
        "",
        "| subject | catalog twin | targets | harness | engine (offline) | server | probe | engine says |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        says = r["engine"]["says"].replace("|", "\\|")
        cells = " | ".join(r.get(k, {}).get("verdict", "not run") for k in ("harness", "engine", "server", "probe"))
        lines.append(
            f"| `{r['subject']}` | {('`' + r['catalog'] + '`') if r['catalog'] else '—'} | "
            f"{', '.join(r['targets']) or '—'} | {cells} | {says} |"
        )
    lines += ["", *meta.get("notes", []), ""]
    text = doc.read_text() if doc.is_file() else "# Mutant matrix\n"
    head = text.split(f"\n{SECTION}\n")[0].rstrip("\n")
    doc.write_text(head + "\n\n" + "\n".join(lines))


def publish(args, row: dict) -> list[dict]:
    """Merge one subject's row into the JSON as it is now (a harness-only and an engine-only run may run side by
    side, each publishing after every subject) and rewrite the doc section from it."""
    previous = json.loads(args.json.read_text()).get("rows", []) if args.json.is_file() else []
    by_name = {r["subject"]: r for r in previous}
    old = by_name.setdefault(row["subject"], {})
    diagnoses = {**old.get("diagnosis", {}), **row.get("diagnosis", {})}
    tiers = sorted({*old.get("tiers", ()), *row.get("tiers", ())})
    old.update(row, tiers=tiers)
    if diagnoses:
        old["diagnosis"] = diagnoses
    order = [s.name for s in subjects()]
    rows = sorted(by_name.values(), key=lambda r: order.index(r["subject"]) if r["subject"] in order else 99)
    for r in rows:
        r.setdefault("harness", verdict(Subject(r["subject"], "", (), ()), None))
        r.setdefault("engine", verdict(Subject(r["subject"], "", (), ()), None))
    runs = [r[k] for r in rows for k in ("harness_run", "engine_run", "server_run", "probe_run") if k in r]
    meta = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} CPU cores shared with other sessions, load average {os.getloadavg()[0]:.1f}",
        "sessions": len(runs),
        "session_wall_s": round(sum(r.get("wall_s", 0) for r in runs), 1),
    }
    if not args.no_doc:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({**meta, "rows": rows}, indent=2) + "\n")
        write_doc(args.doc, rows, meta)
        write_diagnostics_doc(args.diagnostics_doc, rows, meta)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutants", default="all", help="comma-separated subject names (default: all)")
    ap.add_argument(
        "--tiers",
        default="harness,offline",
        help="of harness, offline, server, probe, catalog (the harness on the catalog's ref_single_stage twins, one "
        "session for all subjects)",
    )
    ap.add_argument(
        "--checks",
        default=None,
        help="a pytest -k expression for the sessions (and the probe); 'diagnosis': each subject's own (checks_for)",
    )
    ap.add_argument("--diagnostics-doc", type=Path, default=REPO / "docs" / "diagnostics.md")
    ap.add_argument("--work", type=Path, default=Path("/tmp") / f"omnitts-engine-mutants-{os.getuid()}")
    ap.add_argument("--timeout", type=float, default=2400, help="seconds for one pytest session")
    ap.add_argument(
        "--engine-timeout",
        type=float,
        default=1500,
        help="--omnitts-engine-timeout of the engine sessions (an engine start waits for the machine-wide "
        "/tmp/vllm_omni_device_0_init.lock, which any other engine on the machine may hold)",
    )
    ap.add_argument("--json", type=Path, default=REPO / "benchmarks" / "results" / "engine_mutants.json")
    ap.add_argument("--doc", type=Path, default=REPO / "docs" / "mutant_matrix.md")
    ap.add_argument("--no-doc", action="store_true", help="print only; leave the doc and the JSON alone")
    ap.add_argument("--collect", action="store_true", help="run nothing: read the sessions already in --work")
    args = ap.parse_args(argv)

    chosen = subjects()
    if args.mutants != "all":
        names = args.mutants.split(",")
        unknown = sorted(set(names) - {s.name for s in chosen})
        if unknown:
            raise SystemExit(f"engine_mutants: unknown subjects {unknown}; known: {[s.name for s in chosen]}")
        chosen = [next(s for s in chosen if s.name == name) for name in names]  # in the order given
    tiers = args.tiers.split(",")
    args.work.mkdir(parents=True, exist_ok=True)
    if not args.collect and [t for t in tiers if t != "catalog"]:
        base = scaffold(args.work)
        harness_py = harness_python(args.work) if "harness" in tiers else None
        pythons = {"harness": harness_py, "offline": Path(sys.executable), "server": Path(sys.executable)}

    catalog = {}
    if "catalog" in tiers:
        out = args.work / "catalog"
        if args.collect:
            catalog = json.loads((out / "run.json").read_text()) if (out / "run.json").is_file() else {}
        else:
            catalog = run_catalog(chosen, out, args.timeout, args.checks)
            print(f"catalog: {next(iter(catalog.values()), {}).get('pytest')}", flush=True)
    for subject in chosen:
        work = args.work / subject.name
        runs = {"catalog": catalog[subject.name]} if subject.name in catalog else {}
        if args.collect:
            runs |= {tier: run for tier in tiers if tier != "catalog" and (run := read_run(work / tier)) is not None}
            if not runs:
                continue
        elif [t for t in tiers if t != "catalog"]:
            tree = mutate(base, subject, work)
            only = checks_for(subject, args.checks)
            for tier in (t for t in tiers if t != "catalog"):
                if tier == "probe":
                    runs[tier] = run_probe(tree, work / tier, args.engine_timeout, only)
                else:
                    extra = ["--omnitts-engine-timeout", str(args.engine_timeout)] if tier != "harness" else []
                    extra += ["-k", only] if only else []
                    runs[tier] = run_tier(pythons[tier], tree, tier, work / tier, args.timeout, extra)
                said = runs[tier].get("pytest", runs[tier].get("error"))
                print(f"{subject.name} {tier}: {runs[tier].get('wall_s')} s, {said}", flush=True)
        row = {}
        row.update(
            subject=subject.name,
            catalog=subject.catalog,
            description=subject.description,
            targets=list(subject.targets),
        )
        row["tiers"] = sorted(runs)
        for tier in runs:
            key = {"offline": "engine", "catalog": "harness"}.get(tier, tier)
            row[key] = verdict(subject, runs[tier])
            row[f"{key}_run"] = {k: v for k, v in runs[tier].items() if k not in ("failures", "metrics")}
            if subject.name in DIAGNOSES:
                row.setdefault("diagnosis", {})[key] = diagnosis(subject, tier, runs[tier])
        if "offline" in runs and _pending(subject, runs["offline"]):
            row["engine"]["verdict"] = "pending worker checks (" + row["engine"]["verdict"] + ")"
        verdicts = " | ".join(f"{k}: {row[k]['verdict']}" for k in ("harness", "engine", "server", "probe") if k in row)
        if "diagnosis" in row:
            verdicts += " || " + " | ".join(f"{k}: {v['verdict']}" for k, v in row["diagnosis"].items())
        print(f"  {verdicts}", flush=True)
        rows = publish(args, row)
    rows = json.loads(args.json.read_text())["rows"] if args.json.is_file() else []
    ok = all(
        (r["harness"]["verdict"] in ("PASS", "not run") and r["engine"]["verdict"] in ("PASS", "not run"))
        if not r["targets"]
        else True
        for r in rows
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
