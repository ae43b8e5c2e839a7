"""The guide's Integration Checklist, ticked by the checks that ran.

Items are the ones of the add-tts-model guide's "Integration Checklist" (vLLM-Omni 0.20.0
``.claude/skills/add-tts-model/SKILL.md``). Each item lists the checks that can tick it; an item is

* ``[x]`` when every mapped check that ran passed,
* ``[!]`` when one of them failed (the failing check ids are listed),
* ``[-]`` when its checks were skipped (e.g. the CUDA-graph check on CPU),
* ``[ ]`` when no automated check covers it (a person verifies it).
"""

from __future__ import annotations

import json
from pathlib import Path

# (item id, section, text, checks that tick it)
ITEMS: list[tuple[str, str, str, tuple[str, ...]]] = [
    (
        "I1",
        "Cross-Cutting Invariants",
        "I1: `forward()` docstring states cumulative vs delta; consolidation path audited end-to-end",
        ("i1.stream_equals_offline", "i1.declared_semantics", "i1.matches_reference", "i1.duration_and_sr"),
    ),
    (
        "I2",
        "Cross-Cutting Invariants",
        "I2: Tests / examples / benchmarks never use `dict.get(a) or dict.get(b)` on tensor values; list form handled",
        ("i2.consumer_forms", "static.I2"),
    ),
    (
        "I3",
        "Cross-Cutting Invariants",
        "I3: No `.item()` / `.cpu()` / Python branch on tensor values inside per-step loops",
        ("i3.host_syncs", "static.I3"),
    ),
    (
        "I4",
        "Cross-Cutting Invariants",
        "I4: Offline RTF, browser streaming playback, and concurrent-request smoke test all pass",
        ("i4.concurrency", "perf.rtf_ttfa", "i1.stream_equals_offline"),
    ),
    (
        "I5",
        "Cross-Cutting Invariants",
        "I5: Any cross-step cache keyed by `_omni_req_id`; entries freed when the request finishes",
        ("i5.state_freed", "i5.no_growth", "i5.outputs_not_aliased", "static.I5"),
    ),
    ("P1.1", "Phase 1: HF Reference", "Reference model runs and produces correct audio", ("i1.matches_reference",)),
    ("P1.2", "Phase 1: HF Reference", "Architecture documented (stages, codebooks, tokens, sample rate)", ()),
    ("P1.3", "Phase 1: HF Reference", "Reference audio samples saved for comparison", ("artifacts.wav",)),
    ("P2.1", "Phase 2: Stage Separation", "Model registered in `registry.py`", ("static.registry",)),
    ("P2.2", "Phase 2: Stage Separation", "Config classes created with `model_type` registration", ()),
    (
        "P2.3",
        "Phase 2: Stage Separation",
        "Stage 0 (AR) implemented and generates correct tokens",
        ("i1.matches_reference",),
    ),
    (
        "P2.4",
        "Phase 2: Stage Separation",
        "Stage 1 (Decoder) produces correct audio from tokens — dtype float32 for codec decoder",
        ("i1.model_outputs_every_step", "i1.matches_reference"),
    ),
    (
        "P2.5",
        "Phase 2: Stage Separation",
        "Stage 1 `max_num_seqs` ≥ 4 in production config (default 1 causes gaps under concurrency)",
        ("static.deploy",),
    ),
    (
        "P2.6",
        "Phase 2: Stage Separation",
        "Optional dependency fallbacks handled at `load_weights()` time (torchaudio/soundfile/etc.)",
        ("import.optional_deps",),
    ),
    (
        "P2.7",
        "Phase 2: Stage Separation",
        "Streaming: codec codes accumulated across AR steps (not reset per step)",
        ("i1.matches_reference", "i1.duration_and_sr"),
    ),
    (
        "P2.8",
        "Phase 2: Stage Separation",
        "Streaming: delta audio emitted per chunk, not full re-decoded waveform",
        ("i1.declared_semantics", "i1.matches_reference"),
    ),
    (
        "P2.9",
        "Phase 2: Stage Separation",
        "Streaming: all `forward()` return paths emit `model_outputs`",
        ("i1.model_outputs_every_step",),
    ),
    (
        "P2.10",
        "Phase 2: Stage Separation",
        "Streaming: per-request state keyed by request ID (not shared across requests)",
        ("i4.concurrency", "i5.state_freed"),
    ),
    (
        "P2.11",
        "Phase 2: Stage Separation",
        "Streaming: codec tensors moved to codec decoder device before decode",
        ("device.cuda",),
    ),
    ("P2.12", "Phase 2: Stage Separation", "Stage config YAML created", ("static.deploy",)),
    ("P2.13", "Phase 2: Stage Separation", "`end2end.py` produces audio matching reference quality", ()),
    ("P2.14", "Phase 2: Stage Separation", "README.md written", ()),
    (
        "P3.1",
        "Phase 3: Online Serving",
        "All 5 `serving_speech.py` integration points added in one commit",
        ("static.serving",),
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
    ("P4.1", "Phase 4: Async Chunk", "Stage config updated with `async_chunk: true`", ("static.deploy",)),
    ("P4.2", "Phase 4: Async Chunk", "Stage 1 handles partial chunks correctly", ("chunk.boundaries",)),
    ("P4.3", "Phase 4: Async Chunk", "No audio artifacts at chunk boundaries", ("chunk.boundaries",)),
    ("P4.4", "Phase 4: Async Chunk", "Streaming via API (`stream=true`) works", ()),
    ("P4.5", "Phase 4: Async Chunk", "TTFA measured and acceptable", ("perf.rtf_ttfa",)),
    ("P5.1", "Phase 5: CUDA Graph", "Hot loop identified and profiled", ("i3.graph_breaks",)),
    ("P5.2", "Phase 5: CUDA Graph", "Static buffers allocated", ("cuda_graph.replay",)),
    ("P5.3", "Phase 5: CUDA Graph", "Graph captured and replays correctly", ("cuda_graph.replay",)),
    ("P5.4", "Phase 5: CUDA Graph", "Benchmark shows meaningful speedup", ("cuda_graph.replay",)),
    ("P5.5", "Phase 5: CUDA Graph", "Fallback to eager works for unsupported configs", ("cuda_graph.replay",)),
    (
        "P6.1",
        "Phase 6: Pre-commit and DCO",
        "`pre-commit run --files <changed>` passes before every push",
        ("static.lint",),
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

# Phase 4 does not apply to single-stage patterns (the guide: "single-stage variants skip Phase 4")
NOT_APPLICABLE = {"single-stage": {"P4.1", "P4.2", "P4.3", "P4.4"}, "native-ar": {"P4.1", "P4.2", "P4.3", "P4.4"}}


def tick(results: dict[str, str], pattern: str | None = None) -> list[dict]:
    """``results``: check id -> "passed" | "failed" | "skipped". Returns one row per checklist item."""
    rows = []
    na = NOT_APPLICABLE.get(pattern or "", set())
    for item_id, section, text, checks in ITEMS:
        ran = {c: results[c] for c in checks if c in results}
        failed = sorted(c for c, s in ran.items() if s == "failed")
        passed = [c for c, s in ran.items() if s == "passed"]
        if item_id in na:
            mark, state = "n/a", "not-applicable"
        elif failed:
            mark, state = "[!]", "failed"
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
                "mark": mark,
                "state": state,
                "checks": dict(ran),
                "failed_checks": failed,
            }
        )
    return rows


def render_markdown(model: str, rows: list[dict], header: str = "") -> str:
    out = [f"## Integration Checklist — {model}", ""]
    if header:
        out += [header, ""]
    section = None
    for r in rows:
        if r["section"] != section:
            section = r["section"]
            out += ["", f"### {section}"]
        box = {"[x]": "[x]", "[!]": "[ ]", "[-]": "[ ]", "[ ]": "[ ]", "n/a": "[ ]"}[r["mark"]]
        note = ""
        if r["state"] == "failed":
            note = f" — **FAILED**: {', '.join(r['failed_checks'])}"
        elif r["state"] == "passed":
            note = f" — ticked by {', '.join(c for c, s in r['checks'].items() if s == 'passed')}"
        elif r["state"] == "skipped":
            note = " — check skipped"
        elif r["state"] == "not-applicable":
            note = " — not applicable to this pattern"
        else:
            note = " — manual"
        out.append(f"- {box} {r['text']}{note}")
    return "\n".join(out) + "\n"


def render_terminal(model: str, rows: list[dict]) -> str:
    lines = [f"Integration Checklist — {model}"]
    section = None
    for r in rows:
        if r["section"] != section:
            section = r["section"]
            lines.append(f"  {section}")
        extra = f"  <- FAILED {', '.join(r['failed_checks'])}" if r["failed_checks"] else ""
        lines.append(f"    {r['mark']:>3} {r['text']}{extra}")
    return "\n".join(lines)


def write(out_dir: Path, per_model: dict[str, dict], metrics: dict) -> tuple[Path, Path]:
    """Write checklist.md and checklist.json for every model that ran."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = ["# omnitts runtime validation", ""]
    data = {"models": {}, "metrics": metrics}
    for model, info in sorted(per_model.items()):
        rows = tick(info["results"], info.get("pattern"))
        md.append(render_markdown(model, rows, info.get("header", "")))
        data["models"][model] = {**info, "checklist": rows}
    md_path, json_path = out_dir / "checklist.md", out_dir / "checklist.json"
    md_path.write_text("\n".join(md), encoding="utf-8")
    json_path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    return md_path, json_path
