"""Generate docs/check_report.md: `omnitts-scaffold check` on every TTS model of vLLM-Omni 0.20-0.30.

Usage: python scripts/check_report.py [--out docs/check_report.md] [--check]

Releases come from PyPI through the scaffold's release cache ($OMNITTS_CACHE). Rows are every model
type the release's own detection serves on /v1/audio/speech, then the audio-only pipelines nothing
serves. Every gap `check` reports must have an explanation in EXPLANATIONS below (where it comes
from in that release); an unexplained gap fails the script, so the table never carries a gap
nobody looked at. `--check` compares with the committed file instead of writing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omnitts.knowledge.eras import detect_profile
from omnitts.knowledge.releases import pristine_tree
from omnitts.scaffold.check import SYMBOL, check_view, tts_candidates
from omnitts.scaffold.index import TreeIndex

RELEASES = ["0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0"]
OUT = Path(__file__).resolve().parent.parent / "docs" / "check_report.md"

SHORT = {
    "package": "package",
    "processor": "processor",
    "pipeline": "pipeline",
    "deploy": "deploy",
    "registry": "registry",
    "pipeline_registry": "pipe. reg.",
    "hf_config": "HF cfg",
    "serving.constant": "constant",
    "serving.union": "union",
    "serving.detect": "detect",
    "serving.validate": "validate",
    "serving.build": "build",
    "adapter": "adapter",
    "adapter_import": "import",
    "adapter.stage_keys": "stage keys",
    "adapter.detect": "detect",
    "examples": "examples",
    "tests": "tests",
    "hub_readme": "hub",
}

_NOT_SPEECH = (
    "not a /v1/audio/speech model: listed only because its pipeline's outputs are all audio; nothing"
    " in the release routes it to the speech endpoint"
)
# (model label, point) -> (releases it applies to, explanation). Labels are served model types, or the
# pipeline key of an audio-only pipeline nothing serves.
EXPLANATIONS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("cosyvoice3", "examples"): (
        ("0.20.0",),
        "0.20.0 ships only an offline example for CosyVoice3; the online hub says so itself"
        ' ("CosyVoice3 is intentionally absent: no online example exists for it yet").',
    ),
    ("cosyvoice3", "hub_readme"): (("0.20.0",), "Same fact: only the offline hub links CosyVoice3's examples."),
    ("fish_tts", "tests"): (
        ("0.20.0",),
        "0.20.0 has no e2e test for Fish Speech; its only test is the CPU regression test"
        " tests/model_executor/models/test_fish_speech_regressions.py.",
    ),
    ("omnivoice", "pipeline"): (
        ("0.20.0",),
        "OmniVoice is served as pure diffusion (OmniOpenAIServingSpeech.for_diffusion() sets the type); in 0.20.0"
        " its stage is the legacy stage_configs/omnivoice.yaml (stage_type: diffusion). 0.22-0.24 use the engine's"
        " default diffusion stage, 0.26+ a pipeline.py.",
    ),
    ("voxcpm", "pipeline"): (
        ("0.20.0",),
        "VoxCPM (v1) still runs from the legacy stage_configs/voxcpm*.yaml in 0.20.0 (legacy topologies are a"
        " fallback until 0.24); VoxCPM v1 was dropped in 0.22.0.",
    ),
    ("covo_audio", "serving.validate"): (
        ("0.22.0",),
        "Validated only inside its own top-level branch of _prepare_speech_generation(); _validate_tts_request()"
        " has no branch for it, so the batch endpoint (create_speech_batch) applies the Qwen3-TTS rules. The"
        " adapters of 0.24.0 close this.",
    ),
    ("higgs_audio_v2", "serving.validate"): (
        ("0.22.0",),
        "Same as covo_audio: only its top-level branch of _prepare_speech_generation() validates it; batch"
        " requests fall through to the Qwen3-TTS rules until the 0.24.0 adapter.",
    ),
    ("ming_flash_omni_tts", "adapter"): (
        ("0.24.0", "0.26.0"),
        "Ming-flash-omni TTS keeps its legacy branch in _prepare_speech_generation() (and in 0.26's"
        " _validate_tts_request()) during the hybrid era; tts_adapters/ming_flash_omni_tts.py arrives in 0.28.0.",
    ),
    ("step_audio2", "pipeline"): (
        ("0.24.0",),
        "Step-Audio2's topology is still the legacy stage_configs/step_audio_2*.yaml in 0.24.0, the last"
        " release with that fallback; its pipeline.py arrives in 0.26.0.",
    ),
    ("dots_tts", "adapter"): (
        ("0.28.0",),
        "dots.tts shipped in 0.28.0 with a model, pipeline and deploy yaml but no adapter (it was removed in 0.30.0).",
    ),
    ("dots_tts", "adapter.detect"): (
        ("0.28.0",),
        "Its stage key latent_generator is VoxCPM2's, so detect_tts_model_type() resolves a dots.tts deployment"
        " to voxcpm2 and serves it with VoxCPM2's request handling. `new --stage-key latent_generator` refuses"
        " this unless --detect-priority puts the new adapter first and matches it by architecture.",
    ),
    ("gepard", "adapter"): (
        ("0.28.0",),
        "Gepard's model and pipeline shipped in 0.28.0 without an adapter; tts_adapters/gepard.py arrives in 0.30.0.",
    ),
    ("gepard", "adapter.detect"): (
        ("0.28.0",),
        "Without an adapter nothing claims the stage key gepard: /v1/audio/speech does not serve it in 0.28.0.",
    ),
    ("soulxsinger_svs", "*"): (
        ("0.26.0",),
        f"SoulX-Singer (singing-voice synthesis, a diffusion pipeline) is {_NOT_SPEECH}.",
    ),
    ("soulxsinger_svc", "*"): (("0.26.0",), f"SoulX-Singer (singing-voice conversion) is {_NOT_SPEECH}."),
    ("personaplex", "*"): (
        ("0.28.0", "0.30.0"),
        f"PersonaPlex (full-duplex speech-to-speech, served by the realtime / chat endpoints) is {_NOT_SPEECH}.",
    ),
    ("auk", "*"): (
        ("0.30.0",),
        f"AuK (audio generation with an inline DiT, served by the chat endpoint) is {_NOT_SPEECH}.",
    ),
}


def explain(version: str, label: str, point: str) -> str | None:
    for key in ((label, point), (label, "*")):
        if key in EXPLANATIONS:
            releases, text = EXPLANATIONS[key]
            if version in releases:
                return text
    return None


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(releases: list[str] = RELEASES) -> str:
    out = [
        "# `omnitts-scaffold check` on every TTS model of vLLM-Omni 0.20-0.30",
        "",
        "Generated by `python scripts/check_report.py` from the releases on PyPI (do not edit by hand;",
        "`tests/scaffold/test_check.py` fails when this file is stale). Rows: every model type the release's",
        "own detection serves on `/v1/audio/speech` (`_detect_tts_model_type` with its stage constants in",
        "0.20-0.26, the adapter registry in 0.28-0.30, plus the pure-diffusion type `for_diffusion()` sets), then",
        "the audio-only pipelines nothing serves. Columns: the integration points of the release's era",
        "(docs/profiles.md). Symbols: ✓ present, ✗ missing, ≠ inconsistent, – not applicable (a wheel has no",
        "examples, tests or hub READMEs; a pure-diffusion model has no stage detection), · absent and optional",
        "(HF config registration, for models whose config transformers loads itself).",
        "",
    ]
    gaps: list[tuple[str, str, str, str, str]] = []
    unexplained: list[str] = []
    for version in releases:
        profile = detect_profile(pristine_tree(version))
        index = TreeIndex(profile)
        reports = [check_view(index, view) for view in tts_candidates(index)]
        points = [p.id for p in profile.points]
        served = [r for r in reports if r.view.model_type]
        complete = sum(r.complete for r in served)
        kind = "sdist" if profile.has_sources else "wheel"
        out += [
            f"## {version} ({profile.era.title} era, {kind})",
            "",
            f"{len(served)} served model types, {complete} complete;"
            f" {len(reports) - len(served)} audio-only pipeline(s) not served.",
            "",
            "| model type | folder | " + " | ".join(SHORT[p] for p in points) + " | gaps |",
            "|---|---|" + "---|" * len(points) + "---|",
        ]
        for r in reports:
            label = r.view.label
            name = f"`{label}`" if r.view.model_type else f"({label}, not served)"
            cells = [SYMBOL[r.status(p)] if r.status(p) else " " for p in points]
            out.append(f"| {name} | {r.view.folder or '?'} | " + " | ".join(cells) + f" | {len(r.gaps) or ''} |")
            for g in r.gaps:
                why = explain(version, label, g.point)
                if why is None:
                    unexplained.append(f"{version} {label} {g.point}: {g.detail}")
                gaps.append((version, label, g.point, f"{g.status}: {g.detail}", why or "UNEXPLAINED"))
        out.append("")
    out += [
        "## Every gap, explained",
        "",
        f"{len(gaps)} gaps; those with one cause are grouped.",
        "",
        "| release | model | point(s) | what `check` reports | why |",
        "|---|---|---|---|---|",
    ]
    grouped: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for version, label, point, detail, why in gaps:
        grouped.setdefault((version, label, why), []).append((point, detail))
    for (version, label, why), items in grouped.items():
        points = ", ".join(p for p, _ in items)
        details = "; ".join(d for _, d in items)
        out.append(f"| {version} | `{label}` | {points} | {_cell(details)} | {_cell(why)} |")
    out.append("")
    if unexplained:
        raise SystemExit(
            "unexplained gaps (add them to EXPLANATIONS in scripts/check_report.py):\n" + "\n".join(unexplained)
        )
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    args = parser.parse_args()
    text = render()
    if args.check:
        if args.out.read_text(encoding="utf-8") != text:
            print(f"{args.out} is stale: run python scripts/check_report.py", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
