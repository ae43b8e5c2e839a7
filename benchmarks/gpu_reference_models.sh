#!/usr/bin/env bash
# Reference models on a GPU: parity, goldens, contract, CUDA-graph and mutant-symptom tests with CUDA, plus timings.
#
#   bash benchmarks/gpu_reference_models.sh            # from the repo root; results go to $OUT (or benchmarks/results/)
#
# Needs torch (CUDA), transformers, numpy, pytest and PyYAML only: omnitts does not have to be installed (a shim
# directory maps the omnitts.* namespace onto the repo folders) and cookiecutter/libcst/soundfile/ruff/vllm may be
# missing (the drift and lint tests skip themselves). Environment: OMNITTS_DEVICE (default cuda), PYTHON (default
# python3), OUT (default benchmarks/results/gpu-reference-models).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$REPO/benchmarks/results/gpu-reference-models}"
PY="${PYTHON:-python3}"
export OMNITTS_DEVICE="${OMNITTS_DEVICE:-cuda}"
mkdir -p "$OUT"
cd "$REPO"

SHIM="$(mktemp -d)"
trap 'rm -rf "$SHIM"' EXIT
mkdir -p "$SHIM/omnitts"
for folder in knowledge reference_models scaffold templates validators; do
    [ -d "$REPO/$folder" ] || continue
    ln -s "$REPO/$folder" "$SHIM/omnitts/$folder"
done
export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
export OMNITTS_CACHE="$SHIM/cache"  # mutant sources are materialised here

{
    echo "date: $(date -u +%FT%TZ)"
    echo "device: $OMNITTS_DEVICE"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    "$PY" - <<'EOF'
import importlib
import torch
print("python torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())
for name in ("transformers", "numpy", "yaml", "pytest", "cookiecutter", "libcst", "soundfile"):
    try:
        print(name, getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as exc:  # absent packages are expected on the GPU machine
        print(name, "absent:", type(exc).__name__)
EOF
} 2>&1 | tee "$OUT/env.txt"

"$PY" -m pytest tests/reference_models \
    --confcutdir=tests/reference_models -o addopts="" -p no:cacheprovider --import-mode=importlib \
    -q -rA --durations=15 --junitxml="$OUT/junit.xml" 2>&1 | tee "$OUT/pytest.txt"
status=${PIPESTATUS[0]}

"$PY" - <<'EOF' 2>&1 | tee "$OUT/timings.json"
"""Per-utterance wall time of the HF-style reference and of the served integration, and the code predictor's
CUDA-graph step vs its eager step."""
import json
import os
import time

import torch

from omnitts.reference_models.catalog import get_subject
from omnitts.reference_models.goldens import GOLDEN_TEXTS

device = os.environ["OMNITTS_DEVICE"]
if device == "cpu":
    torch.set_num_threads(1)


def sync():
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def best(fn, repeat=3):
    times = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times)


report = {"device": device, "torch": torch.__version__, "models": {}}
for model in ("ref_two_stage", "ref_single_stage", "ref_native_ar"):
    subject = get_subject(model)
    reference, stages = subject.reference(device), subject.build(device)
    reference.generate(GOLDEN_TEXTS[0])
    subject.run([GOLDEN_TEXTS[0]], device, stages=stages)
    report["models"][model] = {
        "reference_s_per_utterance": round(best(lambda: [reference.generate(t) for t in GOLDEN_TEXTS]) / 3, 4),
        "served_s_for_3_concurrent": round(best(lambda: subject.run(list(GOLDEN_TEXTS), device, stages=stages)), 4),
    }
talker = get_subject("ref_two_stage").build(device)[0]
hidden = torch.randn(1, talker.config.hidden_size, device=device)
frame_idx = torch.zeros(1, dtype=torch.long, device=device)
target = torch.full((1,), 20, dtype=torch.long, device=device)
weight = talker.model.embed_tokens.weight
with torch.no_grad():
    steps = {}
    for name, fn in (("eager", talker.code_predictor.predict_eager), ("static_or_graph", talker.code_predictor.predict)):
        fn(hidden, frame_idx, target, weight)
        steps[name] = round(best(lambda fn=fn: [fn(hidden, frame_idx, target, weight) for _ in range(100)]) * 10, 4)
    report["code_predictor_ms_per_frame"] = steps
    loop = talker.code_predictor._static_loops.get(1)
    report["code_predictor_graph_captured"] = bool(loop is not None and loop.graph is not None)
print(json.dumps(report, indent=1))
EOF

echo "pytest exit status: $status (results in $OUT)"
exit "$status"
