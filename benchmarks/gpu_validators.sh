#!/usr/bin/env bash
# Runtime validators on CUDA for the three reference models; results (JSON/MD/WAV) go to $OUT.
#
#   OUT=/some/dir bash benchmarks/gpu_validators.sh            # from the repository root
#
# Meant for the borrowed GPU machine (torch, numpy, pytest, pytest-xdist, PyYAML, jinja2, transformers; no
# soundfile/libcst/cookiecutter/ruff/vllm and no pip install of this repo): the repo folders are mapped onto the
# omnitts.* namespace with a symlink shim; validators/conftest.py loads the pytest plugin. WAVs fall back to the stdlib
# `wave` writer when soundfile is absent. Writes:
#   $OUT/validators/harness-<time>/{results.json,checklist.md,checklist.json,wav/...}   the suite with --device cuda
#   $OUT/harness_overhead.json                                          harness vs bare loop on CUDA
#   $OUT/summary.md, $OUT/summary.json                                  host syncs, RTF/TTFA, CUDA-graph speedup
#   $OUT/env.txt, $OUT/pytest.log
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$REPO/omnitts-out/gpu}"
PY="${PYTHON:-python3}"
MODELS="${MODELS:-ref_two_stage,ref_single_stage,ref_native_ar}"
DEVICE="${DEVICE:-cuda}"  # DEVICE=cpu only to try the script on a machine without a GPU
mkdir -p "$OUT"

SHIM="$(mktemp -d)"
trap 'rm -rf "$SHIM"' EXIT
mkdir -p "$SHIM/omnitts"
for d in knowledge validators reference_models templates scaffold; do
  [ -d "$REPO/$d" ] && ln -s "$REPO/$d" "$SHIM/omnitts/$d"
done
# the reference models' catalog as an entry point (the plugin finds catalogs by entry point; the shim is no install)
mkdir -p "$SHIM/omnitts_shim-0.0.dist-info"
printf 'Metadata-Version: 2.1\nName: omnitts-shim\nVersion: 0.0\n' > "$SHIM/omnitts_shim-0.0.dist-info/METADATA"
printf '[omnitts.model_catalogs]\nreference = omnitts.reference_models.names\n' \
  > "$SHIM/omnitts_shim-0.0.dist-info/entry_points.txt"
export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
export OMNITTS_CACHE_DIR="${OMNITTS_CACHE_DIR:-$OUT/.cache}"

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
  "$PY" -c 'import soundfile' 2>/dev/null && echo "soundfile: yes" || echo "soundfile: no (stdlib wave writer)"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

cd "$REPO"
set -x
"$PY" -m pytest validators --model "$MODELS" --device "$DEVICE" --omnitts-out "$OUT/validators" \
  --check-timeout 300 -q -p no:cacheprovider -rfs 2>&1 | tee "$OUT/pytest.log"
status=${PIPESTATUS[0]}
"$PY" benchmarks/harness_overhead.py --device "$DEVICE" --models "$MODELS" --repeats "${REPEATS:-21}" --out "$OUT/harness_overhead.json" \
  2>&1 | tee -a "$OUT/pytest.log"
set +x

"$PY" - "$OUT" <<'EOF'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
res = json.loads(sorted((out / "validators").glob("harness-*/results.json"))[-1].read_text())  # the run's folder
rows, summary = [], {"device": res.get("device"), "models": {}}
for model, info in sorted(res["models"].items()):
    m = info["metrics"]
    i3 = m.get("i3.host_syncs", {})
    perf = m.get("perf.rtf_ttfa", {})
    graph = m.get("cuda_graph.replay", {})
    gb = m.get("i3.graph_breaks", {}).get("graph_breaks", {})
    failed = sorted(c for c, s in info["results"].items() if s == "failed")
    summary["models"][model] = {
        "failed_checks": failed,
        "host_syncs_in_steady_steps": i3.get("syncs_in_steady_steps"),
        "cuda_sync_debug_events": i3.get("cuda_sync_debug_events"),
        "suppressed_syncs": (i3.get("suppressed_syncs") or 0) + (i3.get("cuda_sync_debug_suppressed") or 0),
        "steady_steps": i3.get("steady_steps"),
        "sync_sites": i3.get("sites"),
        "steady_sync_sites": i3.get("steady_sites"),  # every steady-step sync with its line and owner
        "rtf_mean": perf.get("rtf_mean"), "rtf_max": perf.get("rtf_max"), "ttfa_ms_max": perf.get("ttfa_ms_max"),
        "cuda_graph_tokens_equal": graph.get("tokens_equal"), "cuda_graph_speedup": graph.get("speedup"),
        "cuda_graph_forward_speedup": graph.get("forward_speedup"),
        "eager_ar_step_s": graph.get("eager_ar_step_s"), "graph_ar_step_s": graph.get("graph_ar_step_s"),
        "graph_breaks": gb.get("graph_break_count"),
    }
    s = summary["models"][model]
    rows.append(f"| `{model}` | {', '.join(failed) or 'none'} | {s['host_syncs_in_steady_steps']} / "
                f"{s['cuda_sync_debug_events']} in {s['steady_steps']} steps (+{s['suppressed_syncs']} suppressed) | "
                f"{s['rtf_mean']} / {s['rtf_max']} | {s['ttfa_ms_max']} | {s['cuda_graph_tokens_equal']} | "
                f"{s['cuda_graph_speedup']} (forward {s['cuda_graph_forward_speedup']}) | {s['graph_breaks']} |")
try:
    ov = json.loads((out / "harness_overhead.json").read_text())
    summary["harness_overhead"] = {r["model"]: r["overhead_pct"] for r in ov["models"]}
    summary["harness_overhead"]["total"] = ov["total_overhead_pct"]
except Exception as exc:  # noqa: BLE001
    summary["harness_overhead"] = f"not measured: {exc}"
md = ["# Runtime validators on CUDA", "", f"device: {res.get('device')}; generated {res.get('generated')}", "",
      "| model | failed checks | host syncs (dispatch / sync_debug) | RTF mean / max | TTFA max ms | graph tokens = eager | CUDA-graph speedup: AR step (forward) | graph breaks |",
      "|---|---|---|---|---|---|---|---|", *rows, "", f"harness overhead (%): {summary['harness_overhead']}", ""]
(out / "summary.md").write_text("\n".join(md))
(out / "summary.json").write_text(json.dumps(summary, indent=2))
print("\n".join(md))
EOF
exit "$status"
