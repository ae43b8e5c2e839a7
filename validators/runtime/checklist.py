"""The guide's Integration Checklist, ticked by the checks that ran.

Items are the ones of the add-tts-model guide's "Integration Checklist" (vLLM-Omni 0.20.0
``.claude/skills/add-tts-model/SKILL.md``). Each item lists the checks that can tick it; an item is

* ``[x]`` when every mapped check that ran passed,
* ``[!]`` when one of them failed (the failing check ids are listed),
* ``[?]`` when nothing failed but the run did not prove it: one of its checks has no outcome (its process died, the
  run stopped before it) or a failure of the model's run could not be attributed to a check,
* ``[-]`` when its checks were skipped (e.g. the CUDA-graph check on CPU),
* ``[ ]`` when no automated check covers it (a person verifies it).

Check outcomes come from pytest's own reports (:mod:`omnitts.validators.runtime.outcomes`); only a check whose setup,
call and teardown passed ticks anything. ``write_merged`` puts each tier's latest verdict next to the others.

Check ids come from :mod:`omnitts.validators.checkids`; ``tests/runtime/test_checkids.py`` proves that each one is
produced by a check. Where the guide's wording contradicts every release, the item follows the releases and
``WHY`` says so (printed under the item).
"""

from __future__ import annotations

import json
from pathlib import Path

from omnitts.validators.checkids import (
    ARTIFACTS_WAV,
    AUDIO_FINITE,
    AUDIO_GATES,
    CHUNK_BOUNDARIES,
    CUDA_GRAPH_REPLAY,
    DEVICE_CUDA,
    DEVICE_PLACEMENT,
    I1_DECLARED_SEMANTICS,
    I1_DURATION_AND_SR,
    I1_MATCHES_REFERENCE,
    I1_MODEL_OUTPUTS_EVERY_STEP,
    I1_NO_REPLAY,
    I1_SEAMS,
    I1_STREAM_EQUALS_OFFLINE,
    I2_CONSUMER_FORMS,
    I3_GRAPH_BREAKS,
    I3_HOST_SYNCS,
    I4_CONCURRENCY,
    I4_SEED_DETERMINISM,
    I5_ABORT_RECOVERY,
    I5_NO_GROWTH,
    I5_OUTPUTS_NOT_ALIASED,
    I5_STATE_FREED,
    IMPORT_OPTIONAL_DEPS,
    INTEGRATION_DEPLOY,
    INTEGRATION_REGISTRY,
    INTEGRATION_SERVING,
    PARITY_BATCHED,
    PARITY_CODES,
    PARITY_DECODER_ALONE,
    PARITY_END_TO_END,
    PERF_RTF_TTFA,
    STATIC_I2,
    STATIC_I3,
    STATIC_I5,
    STATIC_LINT,
    producer,
)

# (item id, section, text, checks that tick it)
ITEMS: list[tuple[str, str, str, tuple[str, ...]]] = [
    (
        "I1",
        "Cross-Cutting Invariants",
        "I1: `forward()` docstring states cumulative vs delta; consolidation path audited end-to-end",
        (I1_STREAM_EQUALS_OFFLINE, I1_DECLARED_SEMANTICS, I1_MATCHES_REFERENCE, I1_DURATION_AND_SR, I1_NO_REPLAY),
    ),
    (
        "I2",
        "Cross-Cutting Invariants",
        "I2: Tests / examples / benchmarks never use `dict.get(a) or dict.get(b)` on tensor values; list form handled",
        (I2_CONSUMER_FORMS, STATIC_I2),
    ),
    (
        "I3",
        "Cross-Cutting Invariants",
        "I3: No `.item()` / `.cpu()` / Python branch on tensor values inside per-step loops",
        (I3_HOST_SYNCS, STATIC_I3),
    ),
    (
        "I4",
        "Cross-Cutting Invariants",
        "I4: Offline RTF, browser streaming playback, and concurrent-request smoke test all pass",
        (I4_CONCURRENCY, I4_SEED_DETERMINISM, PERF_RTF_TTFA, I1_STREAM_EQUALS_OFFLINE),
    ),
    (
        "I5",
        "Cross-Cutting Invariants",
        "I5: Any cross-step cache keyed by the runner's request id (`request_id` from 0.20, `req_id` under the 0.30"
        " Model Runner V2) or by `global_request_id[0]` (the orchestrator's id); entries freed when the request"
        " finishes",
        (I5_STATE_FREED, I5_NO_GROWTH, I5_ABORT_RECOVERY, I5_OUTPUTS_NOT_ALIASED, STATIC_I5),
    ),
    (
        "P1.1",
        "Phase 1: HF Reference",
        "Reference model runs and produces correct audio",
        (I1_MATCHES_REFERENCE, PARITY_END_TO_END, PARITY_BATCHED),
    ),
    ("P1.2", "Phase 1: HF Reference", "Architecture documented (stages, codebooks, tokens, sample rate)", ()),
    ("P1.3", "Phase 1: HF Reference", "Reference audio samples saved for comparison", (ARTIFACTS_WAV,)),
    ("P2.1", "Phase 2: Stage Separation", "Model registered in `registry.py`", (INTEGRATION_REGISTRY,)),
    ("P2.2", "Phase 2: Stage Separation", "Config classes created with `model_type` registration", ()),
    (
        "P2.3",
        "Phase 2: Stage Separation",
        "Stage 0 (AR) implemented and generates correct tokens",
        (I1_MATCHES_REFERENCE, PARITY_CODES),
    ),
    (
        "P2.4",
        "Phase 2: Stage Separation",
        "Stage 1 (Decoder) produces correct audio from tokens — dtype float32 for codec decoder",
        (I1_MODEL_OUTPUTS_EVERY_STEP, I1_MATCHES_REFERENCE, PARITY_DECODER_ALONE, AUDIO_FINITE, AUDIO_GATES),
    ),
    (
        "P2.5",
        "Phase 2: Stage Separation",
        "Stage 1 `max_num_seqs` ≥ 4 in production config (default 1 causes gaps under concurrency)",
        (),
    ),
    (
        "P2.6",
        "Phase 2: Stage Separation",
        "Optional dependency fallbacks handled at `load_weights()` time (torchaudio/soundfile/etc.)",
        (IMPORT_OPTIONAL_DEPS,),
    ),
    (
        "P2.7",
        "Phase 2: Stage Separation",
        "Streaming: codec codes accumulated across AR steps (not reset per step)",
        (I1_MATCHES_REFERENCE, I1_DURATION_AND_SR),
    ),
    (
        "P2.8",
        "Phase 2: Stage Separation",
        "Streaming: delta audio emitted per chunk, not full re-decoded waveform",
        (I1_DECLARED_SEMANTICS, I1_MATCHES_REFERENCE),
    ),
    (
        "P2.9",
        "Phase 2: Stage Separation",
        "Streaming: all `forward()` return paths emit `model_outputs`",
        (I1_MODEL_OUTPUTS_EVERY_STEP,),
    ),
    (
        "P2.10",
        "Phase 2: Stage Separation",
        "Streaming: per-request state keyed by request ID (not shared across requests)",
        (I4_CONCURRENCY, I5_STATE_FREED),
    ),
    (
        "P2.11",
        "Phase 2: Stage Separation",
        "Streaming: codec tensors moved to codec decoder device before decode",
        (DEVICE_CUDA, DEVICE_PLACEMENT),
    ),
    ("P2.12", "Phase 2: Stage Separation", "Stage config YAML created", (INTEGRATION_DEPLOY,)),
    ("P2.13", "Phase 2: Stage Separation", "`end2end.py` produces audio matching reference quality", ()),
    ("P2.14", "Phase 2: Stage Separation", "README.md written", ()),
    (
        "P3.1",
        "Phase 3: Online Serving",
        "All 5 `serving_speech.py` integration points added in one commit",
        (INTEGRATION_SERVING,),
    ),
    (
        "P3.2",
        "Phase 3: Online Serving",
        "Only extract params in `_build_*_params` that are forwarded to the model call (ruff F841)",
        (),
    ),
    ("P3.3", "Phase 3: Online Serving", "Prompt builder handles text input correctly", ()),
    ("P3.4", "Phase 3: Online Serving", "Voice cloning works (if supported)", ()),
    ("P3.5", "Phase 3: Online Serving", "All response formats work (wav, mp3, flac, pcm)", ()),
    ("P3.6", "Phase 3: Online Serving", "Client scripts and server launcher created", ()),
    (
        "P3.7",
        "Phase 3: Online Serving",
        "E2E online serving test written (`tests/e2e/online_serving/test_<model>.py`)",
        (),
    ),
    ("P3.8", "Phase 3: Online Serving", "Buildkite CI entry added to `.buildkite/test-merge.yml`", ()),
    ("P3.9", "Phase 3: Online Serving", "Gradio demo working", ()),
    ("P3.10", "Phase 3: Online Serving", "Documentation added (offline + online docs, nav, supported models)", ()),
    ("P4.1", "Phase 4: Async Chunk", "Stage config updated with `async_chunk: true`", ("OMNI-INT-003",)),
    ("P4.2", "Phase 4: Async Chunk", "Stage 1 handles partial chunks correctly", (CHUNK_BOUNDARIES,)),
    ("P4.3", "Phase 4: Async Chunk", "No audio artifacts at chunk boundaries", (CHUNK_BOUNDARIES, I1_SEAMS)),
    ("P4.4", "Phase 4: Async Chunk", "Streaming via API (`stream=true`) works", ()),
    ("P4.5", "Phase 4: Async Chunk", "TTFA measured and acceptable", (PERF_RTF_TTFA,)),
    ("P5.1", "Phase 5: CUDA Graph", "Hot loop identified and profiled", (I3_GRAPH_BREAKS,)),
    ("P5.2", "Phase 5: CUDA Graph", "Static buffers allocated", (CUDA_GRAPH_REPLAY,)),
    ("P5.3", "Phase 5: CUDA Graph", "Graph captured and replays correctly", (CUDA_GRAPH_REPLAY,)),
    ("P5.4", "Phase 5: CUDA Graph", "Benchmark shows meaningful speedup", (CUDA_GRAPH_REPLAY,)),
    ("P5.5", "Phase 5: CUDA Graph", "Fallback to eager works for unsupported configs", (CUDA_GRAPH_REPLAY,)),
    (
        "P6.1",
        "Phase 6: Pre-commit and DCO",
        "`pre-commit run --files <changed>` passes before every push",
        (STATIC_LINT,),
    ),
    (
        "P6.2",
        "Phase 6: Pre-commit and DCO",
        "Every commit has `Signed-off-by` matching the author email (`git commit -s`)",
        (),
    ),
    (
        "P6.3",
        "Phase 6: Pre-commit and DCO",
        "`git config user.email` matches the email registered on your GitHub account",
        (),
    ),
]

# Why an item departs from the guide's wording or has no check (rendered under the item).
WHY: dict[str, str] = {
    "P2.5": (
        "No check ticks this item: OMNI-INT-001 checks the AR stage (where one sequence serialises concurrent"
        " requests); the decoder's `max_num_seqs` is each model's choice in the releases, whose own two-stage decoders"
        " run from 1 to 64 at once (omnitts's docs/profiles.md, read from each release's deploy configs), so a person"
        " decides. The scaffold writes 1: raise it once your decoder batches windows."
    ),
    "I5": (
        "The guide says `_omni_req_id`, but no release (0.14-0.30) sets that key, so a cache keyed by it puts every"
        " request in one entry. The releases give a model `global_request_id` (a one-element list with the"
        " orchestrator's id, in the entry stage's info dict, every release), `request_id` (the runner's per-stage id,"
        " written right before `preprocess()` from 0.20; the id `on_requests_finished` receives) and `req_id`"
        " (0.30's Model Runner V2 writes it instead of `request_id`). OMNI-I5-001 reports a key the target release"
        " never sets."
    ),
}

# Phase 4 does not apply to single-stage patterns (the guide: "single-stage variants skip Phase 4")
NOT_APPLICABLE = {"single-stage": {"P4.1", "P4.2", "P4.3", "P4.4"}, "native-ar": {"P4.1", "P4.2", "P4.3", "P4.4"}}


def tick(results: dict[str, str], pattern: str | None = None, unproven: list[str] | tuple = ()) -> list[dict]:
    """``results``: check id -> "passed" | "failed" | "skipped" | "not-run"; ``unproven``: why nothing of this model
    may be ticked (failures not attributable to a check). Returns one row per checklist item."""
    rows = []
    na = NOT_APPLICABLE.get(pattern or "", set())
    for item_id, section, text, checks in ITEMS:
        ran = {c: results[c] for c in checks if c in results}
        # a tick whose producing check was skipped (e.g. integration.points outside a tree) counts as skipped;
        # one whose producing check has no outcome is as unproven as its producer
        for c in checks:
            if c not in results and results.get(producer(c)) in ("skipped", "not-run"):
                ran[c] = results[producer(c)]
        failed = sorted(c for c, s in ran.items() if s == "failed")
        missing = sorted(c for c, s in ran.items() if s == "not-run")
        passed = [c for c, s in ran.items() if s == "passed"]
        if item_id in na:
            mark, state = "n/a", "not-applicable"
        elif failed:
            mark, state = "[!]", "failed"
        elif missing or (passed and unproven):
            mark, state = "[?]", "unproven"
        elif passed:
            mark, state = "[x]", "passed"
        elif ran:
            mark, state = "[-]", "skipped"
        else:
            mark, state = "[ ]", "manual"
        rows.append(
            {
                "id": item_id,
                "section": section,
                "text": text,
                "why": WHY.get(item_id, ""),
                "mark": mark,
                "state": state,
                "checks": dict(ran),
                "failed_checks": failed,
                "unproven_checks": missing,
                "by": list(checks),
            }
        )
    return rows


def _note(r: dict, where: str = "in this run") -> str:
    """What follows an item's text: which checks ticked it, or why it is not ticked."""
    if r["state"] == "failed":
        return f"**FAILED**: {', '.join(r['failed_checks'])}"
    if r["state"] == "unproven":
        if r["unproven_checks"]:
            return f"**NOT PROVEN**: {', '.join(r['unproven_checks'])} did not finish"
        return "**NOT PROVEN**: the model's run had failures no check could claim (see results.json)"
    if r["state"] == "passed":
        return f"ticked by {', '.join(c for c, s in r['checks'].items() if s == 'passed')}"
    if r["state"] == "manual" and r.get("by"):
        return f"not checked {where} ({', '.join(r['by'])})"
    return {"skipped": "check skipped", "not-applicable": "not applicable to this pattern"}.get(r["state"], "manual")


def render_markdown(model: str, rows: list[dict], header: str = "") -> str:
    out = [f"## Integration Checklist — {model}", ""]
    if header:
        out += [header, ""]
    section = None
    for r in rows:
        if r["section"] != section:
            section = r["section"]
            out += ["", f"### {section}"]
        box = "[x]" if r["mark"] == "[x]" else "[ ]"
        out.append(f"- {box} {r['text']} — {_note(r)}")
        if r.get("why"):
            out.append(f"  - *Why:* {r['why']}")
    return "\n".join(out) + "\n"


def render_terminal(model: str, rows: list[dict]) -> str:
    lines = [f"Integration Checklist — {model}"]
    section = None
    for r in rows:
        if r["section"] != section:
            section = r["section"]
            lines.append(f"  {section}")
        extra = ""
        if r["failed_checks"]:
            extra = f"  <- FAILED {', '.join(r['failed_checks'])}"
        elif r["state"] == "unproven":
            extra = f"  <- NOT PROVEN {', '.join(r['unproven_checks']) or '(unattributed failures)'}"
        lines.append(f"    {r['mark']:>3} {r['text']}{extra}")
    return "\n".join(lines)


def write(out_dir: Path, per_model: dict[str, dict], metrics: dict) -> tuple[Path, Path]:
    """Write checklist.md and checklist.json for every model that ran."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = ["# omnitts runtime validation", ""]
    data = {"models": {}, "metrics": metrics}
    for model, info in sorted(per_model.items()):
        rows = tick(info["results"], info.get("pattern"), info.get("unproven") or ())
        header = info.get("header", "")
        if info.get("unproven"):
            header = (header + "\n\n" if header else "") + "**Not proven**: " + "; ".join(info["unproven"])
        md.append(render_markdown(model, rows, header))
        data["models"][model] = {**info, "checklist": rows}
    md_path, json_path = out_dir / "checklist.md", out_dir / "checklist.json"
    md_path.write_text("\n".join(md), encoding="utf-8")
    json_path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    return md_path, json_path


# the merged box: the worst state any tier reports wins, and only a tier's pass ticks
_MERGE_ORDER = ("failed", "unproven", "passed", "skipped", "manual", "not-applicable")
_MERGED_MARK = {"failed": "[!]", "unproven": "[?]", "passed": "[x]", "skipped": "[-]", "manual": "[ ]"}


def merge(per_tier: dict[str, dict]) -> list[dict]:
    """One model's rows over the tiers. ``per_tier``: tier -> {results, pattern, unproven, run}. Each merged row keeps
    every tier's own row under ``tiers``; its state is the worst of theirs (failed, unproven, passed, skipped, ...)."""
    ticked = {t: tick(v["results"], v.get("pattern"), v.get("unproven") or ()) for t, v in per_tier.items()}
    merged = []
    for i, (item_id, section, text, _checks) in enumerate(ITEMS):
        rows = {t: r[i] for t, r in ticked.items()}
        states = [r["state"] for r in rows.values()]
        state = min(states, key=_MERGE_ORDER.index) if states else "manual"
        if state == "not-applicable" and any(s != "not-applicable" for s in states):
            state = "manual"
        merged.append(
            {
                "id": item_id,
                "section": section,
                "text": text,
                "why": WHY.get(item_id, ""),
                "mark": _MERGED_MARK.get(state, "n/a"),
                "state": state,
                "tiers": rows,
            }
        )
    return merged


def write_merged(out_dir: Path, latest: dict[str, dict[str, dict]]) -> tuple[Path, Path]:
    """``out_dir/checklist.md`` and ``.json``: per model, every tier's latest run side by side (``latest``: model ->
    tier -> {run, generated, results, pattern, unproven})."""
    out_dir = Path(out_dir)
    md = [
        "# omnitts: the Integration Checklist over every tier",
        "",
        "Each item shows every tier's verdict from the latest run of that tier for the model (the run folders are next"
        " to this file). The box is ticked when a tier passed it and no tier failed it or left it unproven.",
        "",
    ]
    data: dict = {"models": {}}
    for model in sorted(latest):
        tiers = dict(sorted(latest[model].items()))
        rows = merge(tiers)
        runs = ", ".join(f"{t}: {v['run']}" for t, v in tiers.items())
        md += [f"## Integration Checklist — {model}", "", f"Runs: {runs}", ""]
        section = None
        for r in rows:
            if r["section"] != section:
                section = r["section"]
                md += ["", f"### {section}"]
            box = "[x]" if r["mark"] == "[x]" else "[ ]"
            said = {t: tr for t, tr in r["tiers"].items() if tr["state"] != "manual"}
            verdicts = "; ".join(f"{t} {tr['mark']} {_note(tr)}" for t, tr in said.items())
            md.append(f"- {box} {r['text']} — {verdicts or _note(next(iter(r['tiers'].values())), 'by any tier')}")
            if r.get("why"):
                md.append(f"  - *Why:* {r['why']}")
        md.append("")
        data["models"][model] = {"runs": {t: v["run"] for t, v in tiers.items()}, "checklist": rows}
    md_path, json_path = out_dir / "checklist.md", out_dir / "checklist.json"
    md_path.write_text("\n".join(md), encoding="utf-8")
    json_path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    return md_path, json_path
