"""Generate the "Deploy and stage values" section of docs/profiles.md: every value the scaffold writes into a
model's deploy config and stage configuration, next to what the release's own TTS models set, per release.

Usage: python scripts/deploy_values.py [--check]

Both sides are read, not typed: the scaffold's side from what ``omnitts-scaffold new`` would write into the release
(``plan_new`` on the pristine tree, nothing written), the release's side from its own files (every model type its
detection serves on /v1/audio/speech, its pipeline and default deploy config; 0.18: its ``stage_configs/`` YAML).
Models are compared by shape: the scaffold's two-stage pattern with the release's two-stage models, its
single-stage and native-AR patterns (one stage) with the release's one-stage models.

A scaffold value that none of the release's models of that shape sets must carry a reason in ``REASONS`` below, or
this script fails: the table never shows a difference nobody decided. ``--check`` compares with docs/profiles.md
instead of writing it (tests/scaffold/test_deploy_values.py runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import yaml

from omnitts.knowledge import layout
from omnitts.knowledge.configs import parse_pipelines
from omnitts.knowledge.eras import detect_profile
from omnitts.knowledge.releases import pristine_tree
from omnitts.scaffold.check import model_views
from omnitts.scaffold.index import TreeIndex
from omnitts.scaffold.naming import make_names
from omnitts.scaffold.new import plan_new

RELEASES = ["0.18.0", "0.20.0", "0.22.0", "0.24.0", "0.26.0", "0.28.0", "0.30.0"]
DOC = Path(__file__).resolve().parent.parent / "docs" / "profiles.md"
BEGIN = "<!-- deploy-values:begin (python scripts/deploy_values.py writes this section) -->"
END = "<!-- deploy-values:end -->"
UNSET = "unset"
NAME = "my_tts"
SHAPES = {"two-stage": ("two-stage",), "one-stage": ("single-stage", "native-ar")}
# Pipeline fields that name things (the model's own stage keys, classes, processors) are not values to compare.
NAMING = ("stage_id", "model_stage", "model_arch", "stop_token_ids")

# (shape, key) -> why the scaffold writes a value none of the release's models of that shape writes. A key that
# differs without an entry here fails the script.
_CODEC = (
    "a property of the model's codec, not a deployment choice: the tiny codec decoder is causal, so windows of 8 new "
    "frames after 4 frames of context decode exactly like the whole utterance (the generated test checks it); each "
    "release model sets its own codec's. Set yours from your codec"
)
_SAMPLING = (
    "sampling belongs to the real model (match its reference: the guide's Phase 2 table); the tiny model samples "
    "greedily (temperature 0.0), where this changes nothing, so vLLM's default stays"
)
_EAGER = (
    "the generated AR stage keeps per-request state in Python between preprocess() and forward(), which a vLLM CUDA "
    "graph replay skips (seen on an H200: KeyError in forward); turn graphs on once forward() is graph-safe (guide "
    "Phase 5)"
)
REASONS: dict[tuple[str, str], str] = {
    ("two-stage", "connector.codec_chunk_frames"): _CODEC,
    ("two-stage", "connector.codec_left_context_frames"): _CODEC,
    ("two-stage", "stage 0.enforce_eager"): _EAGER,
    ("two-stage", "connector.shm_threshold_bytes"): (
        "the shared-memory connector's own default (65536) where a release reads the key; from 0.26 none does"
    ),
    ("two-stage", "stage 0.async_scheduling"): "the release's models disagree (true, false): vLLM's default stays",
    ("two-stage", "stage 1.async_scheduling"): "the release's models disagree (true, false): vLLM's default stays",
    **{
        (shape, f"stage {stage}.default_sampling_params.{key}"): _SAMPLING
        for shape in ("two-stage", "one-stage")
        for stage in (0, 1)
        for key in ("top_k", "top_p", "repetition_penalty")
    },
}


@dataclass
class Model:
    """One TTS model of a release (or the scaffold's), flattened to ``key -> value``."""

    label: str
    values: dict[str, object] = field(default_factory=dict)

    @property
    def stages(self) -> int:
        return len({k.split(".", 1)[0].split()[1] for k in self.values if k.startswith("stage ")})


def _show(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value, sort_keys=True) if not isinstance(value, str) else value


def _flatten(prefix: str, mapping: dict, out: dict[str, object]) -> None:
    for key, value in mapping.items():
        if isinstance(value, dict):
            _flatten(f"{prefix}{key}.", value, out)
        else:
            out[f"{prefix}{key}"] = value


def _merge(base: dict, over: dict) -> dict:
    """``base_config`` inheritance: mappings merge, ``stages`` merge by ``stage_id``, anything else is replaced."""
    out = dict(base)
    for key, value in over.items():
        if key == "stages" and isinstance(value, list) and isinstance(base.get(key), list):
            stages = {s.get("stage_id"): dict(s) for s in base[key]}
            for stage in value:
                stages[stage.get("stage_id")] = _merge(stages.get(stage.get("stage_id"), {}), stage)
            out[key] = list(stages.values())
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            out[key] = _merge(base[key], value)
        else:
            out[key] = value
    return out


def _load(text_of, rel: str, depth: int = 0) -> dict:
    data = yaml.safe_load(text_of(rel) or "") or {}
    base = data.pop("base_config", None)
    if base and depth < 4:
        data = _merge(_load(text_of, f"{Path(rel).parent.as_posix()}/{base}", depth + 1), data)
    return data


def deploy_values(data: dict) -> dict[str, object]:
    """The comparable values of a deploy config (0.20+) or a ``stage_args`` stage config (0.18)."""
    out: dict[str, object] = {}
    if "async_chunk" in data:
        out["async_chunk"] = data["async_chunk"]
    legacy = "stage_args" in data
    connectors = (data.get("runtime") or {}).get("connectors") if legacy else data.get("connectors")
    for connector in (connectors or {}).values():
        if isinstance(connector, dict):
            out["connector.name"] = connector.get("name")
            _flatten("connector.", connector.get("extra") or {}, out)
    for raw in data.get("stage_args" if legacy else "stages") or []:
        stage = dict(raw)
        if legacy:  # engine_args and runtime nest what a deploy config keeps flat
            stage = {
                **{k: v for k, v in stage.items() if k not in ("engine_args", "runtime")},
                **(stage.get("engine_args") or {}),
                **(stage.get("runtime") or {}),
            }
        sid = stage.pop("stage_id", None)
        for key in NAMING:
            stage.pop(key, None)
        stage = {k: v for k, v in stage.items() if not str(k).endswith("_func")}
        flat: dict[str, object] = {}
        _flatten("", stage, flat)
        out.update({f"stage {sid}.{k}": v for k, v in flat.items() if k.split(".")[-1] not in NAMING})
    return out


def pipeline_values(text: str, rel: str) -> dict[str, object]:
    """The comparable ``StagePipelineConfig`` values of a pipeline.py (0.20+)."""
    out: dict[str, object] = {}
    for pipeline in parse_pipelines(SimpleNamespace(read=lambda _: text), rel)[:1]:
        for stage in pipeline.stages:
            flat: dict[str, object] = {}
            _flatten("", {k: v.value for k, v in stage.fields.items()}, flat)
            for key, value in flat.items():
                if key.split(".")[-1] in NAMING or key.endswith("_func"):
                    continue
                out[f"stage {stage.stage_id} (pipeline).{key}"] = value
    return out


def release_models(root: Path) -> list[Model]:
    """The release's /v1/audio/speech models, each with its pipeline and default deploy (or legacy stage) config."""
    index = TreeIndex(detect_profile(root))
    models = []
    for model_type in index.served_types():
        for view in model_views(index, model_type):
            for pipeline in view.pipelines[:1]:
                values: dict[str, object] = {}
                if pipeline.legacy:
                    values.update(deploy_values(_load(index.text, pipeline.legacy)))
                else:
                    rel = f"{layout.MODELS}/{pipeline.folder}/pipeline.py"
                    values.update(pipeline_values(index.text(rel), rel))
                    deploy = index.deploy_rel(pipeline)
                    if index.exists(deploy):
                        values.update(deploy_values(_load(index.text, deploy)))
                models.append(Model(model_type, values))
    return models


def scaffold_models(root: Path) -> dict[str, Model]:
    """What ``omnitts-scaffold new my_tts --pattern P`` would write into the tree, per pattern (nothing written)."""
    profile = detect_profile(root)
    out = {}
    for pattern in ("two-stage", "single-stage", "native-ar"):
        plan = plan_new(profile, make_names(NAME, pattern), parallel=False)
        files = {op.rel: op.new for op in plan.ops if op.new is not None}
        values: dict[str, object] = {}
        index = TreeIndex(profile, sources=files)
        pipe_rel = f"{layout.MODELS}/{NAME}/pipeline.py"
        if pipe_rel in files:
            values.update(pipeline_values(files[pipe_rel], pipe_rel))
            pipeline = next(p for p in index.pipelines if p.folder == NAME)
            values.update(deploy_values(_load(index.text, index.deploy_rel(pipeline))))
        else:  # 0.18: the stage_args config is the whole topology
            rel = f"{layout.STAGE_CONFIGS}/{NAME}.yaml"
            values.update(deploy_values(_load(index.text, rel)))
        out[pattern] = Model(f"scaffold {pattern}", values)
    return out


def _cell(values: dict[str, list[str]]) -> str:
    return "; ".join(f"`{v}`: {', '.join(labels)}" for v, labels in sorted(values.items(), key=lambda x: -len(x[1])))


def compare(release: str, shape: str, scaffolds: list[Model], models: list[Model]) -> tuple[list[str], list[str]]:
    """The table rows of one shape and the keys that differ without a reason."""
    keys = list(dict.fromkeys(k for s in scaffolds for k in s.values))
    # keys every release model of the shape sets while the scaffold leaves them to the default
    keys += sorted({k for k in set.intersection(*(set(m.values) for m in models)) if k not in keys}) if models else []
    rows, unexplained = [], []
    for key in keys:
        ours = dict.fromkeys(_show(s.values.get(key, UNSET)) if key in s.values else UNSET for s in scaffolds)
        theirs: dict[str, list[str]] = {}
        for m in models:
            theirs.setdefault(_show(m.values[key]) if key in m.values else UNSET, []).append(m.label)
        if not models:
            verdict = "no model of this shape in the release"
        elif all(v in theirs for v in ours):
            verdict = "same" if len(theirs) == 1 else "one of the release's"
        else:
            reason = REASONS.get((shape, key))
            verdict = f"differs: {reason}" if reason else "differs"
            if not reason:
                unexplained.append(f"{release} {shape} {key}")
        scaffold_cell = " / ".join(f"`{v}`" for v in ours)
        rows.append(f"| `{key}` | {scaffold_cell} | {_cell(theirs) or '–'} | {verdict} |")
    return rows, unexplained


def render(releases: list[str] = RELEASES) -> str:
    out = [BEGIN, ""]
    unexplained: list[str] = []
    for release in releases:
        root = pristine_tree(release)
        models = release_models(root)
        scaffolds = scaffold_models(root)
        out += [f"### vLLM-Omni {release}", ""]
        for shape, patterns in SHAPES.items():
            stages = 2 if shape == "two-stage" else 1
            theirs = [m for m in models if m.stages == stages]
            ours = [scaffolds[p] for p in patterns]
            names = ", ".join(m.label for m in theirs) or "none"
            out += [
                f"{shape.capitalize()} ({' and '.join(patterns)} pattern{'s' if len(patterns) > 1 else ''}) against "
                f"the release's {shape} TTS models: {names}.",
                "",
                "| key | scaffold writes | release's models | verdict |",
                "|---|---|---|---|",
            ]
            rows, missing = compare(release, shape, ours, theirs)
            out += rows + [""]
            unexplained += missing
    if unexplained:
        raise SystemExit("deploy_values: differences without a reason in REASONS:\n  " + "\n  ".join(unexplained))
    return "\n".join([*out, END])


def splice(doc: str, section: str) -> str:
    if BEGIN not in doc or END not in doc:
        return doc.rstrip("\n") + "\n\n" + section + "\n"
    head, rest = doc.split(BEGIN, 1)
    return head + section + rest.split(END, 1)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when docs/profiles.md is not current")
    args = parser.parse_args(argv)
    current = DOC.read_text(encoding="utf-8")
    wanted = splice(current, render())
    if args.check:
        if wanted != current:
            print("docs/profiles.md is stale: run python scripts/deploy_values.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(wanted, encoding="utf-8")
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
