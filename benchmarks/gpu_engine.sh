#!/usr/bin/env bash
# The engine tier on the borrowed H200: vLLM 0.30.0 + vLLM-Omni 0.30.0 carried in as a sha256-checked tar.xz,
# scaffolded models overlaid on the carried vllm_omni package, `pytest validators --engine ... --device cuda`.
#
# The GPU machine has torch, pytest and transformers but no vllm, libcst or pip install of omnitts, and a device
# call carries at most ~60 MiB of ignored files, so the work is split into phases (one device call each):
#
#   bash benchmarks/gpu_engine.sh stash DIR          # copy the carry part(s) in DIR to /tmp/carry (one per call)
#   bash benchmarks/gpu_engine.sh setup SHA256 DIR   # join the parts, check the sha256, extract to /tmp/site,
#                                                    # overlay DIR/overlay.tar (the scaffolded models' files)
#   OUT=... bash benchmarks/gpu_engine.sh run MODEL:TIER [MODEL:TIER ...]
#   (ENGINE_ARGS="--checkpoint DIR --dummy-weights ...": more pytest arguments for every session, no spaces inside one)
#
# Making the carry and the overlay on the CPU machine: benchmarks/results/gpu-engine-0.30.0/README.md.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
SITE=/tmp/site
phase="${1:?phase: stash, setup or run}"
shift

case "$phase" in
  stash)
    mkdir -p /tmp/carry && cp -v "${1:?DIR}"/part.* /tmp/carry/ && ls -la /tmp/carry ;;
  setup)
    sha="${1:?SHA256}"; dir="${2:?DIR}"
    [ -d "$dir" ] && cp "$dir"/part.* /tmp/carry/ 2>/dev/null
    cat /tmp/carry/part.* > /tmp/carry.tar.xz
    echo "$sha  /tmp/carry.tar.xz" | sha256sum -c - || exit 3
    rm -rf "$SITE" && mkdir -p "$SITE" && tar -xJf /tmp/carry.tar.xz -C "$SITE" || exit 3
    # the release's own package before the overlay, e.g. for benchmarks/lint_speed.py --tree /tmp/pristine-0.30.0
    rm -rf /tmp/pristine-0.30.0 && mkdir -p /tmp/pristine-0.30.0 && cp -r "$SITE/vllm_omni" /tmp/pristine-0.30.0/
    tar -xf "$dir/overlay.tar" -C "$SITE" && echo "overlay: $(tar -tf "$dir/overlay.tar" | wc -l) files" ;;
  run)
    OUT="${OUT:?OUT}"
    mkdir -p "$OUT"
    SHIM=/tmp/shim
    rm -rf "$SHIM" && mkdir -p "$SHIM/omnitts"
    for d in knowledge validators reference_models templates scaffold; do ln -s "$REPO/$d" "$SHIM/omnitts/$d"; done
    export PYTHONPATH="$SHIM:$SITE" OMNITTS_ENGINE_PYTHON="$(command -v "$PY")" VLLM_USE_FLASHINFER_SAMPLER=0 \
      OMNITTS_CACHE=/tmp/omc
    {
      date -u
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
      "$PY" -c 'import sys, torch, vllm, vllm_omni; print("python", sys.version.split()[0], "torch", torch.__version__,
"vllm", vllm.__version__, "vllm_omni", vllm_omni.__version__)' 2>&1 | tail -1
    } > "$OUT/env.txt"
    cat "$OUT/env.txt"
    cd "$REPO"
    one() {  # one pytest validators session; its line in summary.txt
      local model="${1%%:*}" tier="${1##*:}" started=$SECONDS rc extra=()
      [ -n "${ENGINE_ARGS:-}" ] && read -ra extra <<< "$ENGINE_ARGS"  # e.g. --checkpoint DIR --dummy-weights
      "$PY" -m pytest validators --omni-root "$SITE" --model "$model" --engine "$tier" --device cuda \
        --omnitts-out "$OUT/$model-$tier" -q -rA -p no:cacheprovider "${extra[@]}" > "$OUT/engine-$model-$tier.log" 2>&1
      rc=$?
      echo "$model $tier: exit $rc, $((SECONDS - started)) s, $(tail -1 "$OUT/engine-$model-$tier.log")" \
        | tee -a "$OUT/summary.txt"
      return $rc
    }
    # PARALLEL=1: the sessions at once (one GPU has room for all; engine starts still take vLLM-Omni's device
    # init lock one at a time)
    status=0
    if [ "${PARALLEL:-0}" = 1 ]; then
      pids=()
      for job in "$@"; do one "$job" & pids+=($!); done
      for pid in "${pids[@]}"; do wait "$pid" || status=1; done
    else
      for job in "$@"; do one "$job" || status=1; done
    fi
    # the engines' own logs beside the sessions', then one archive (the device tool returns a few files only)
    for f in /tmp/omnitts-engine-*/*/*.log; do [ -f "$f" ] && cp "$f" "$OUT/$(basename "$(dirname "$(dirname "$f")")")-$(basename "$f")"; done
    tar -czf "/tmp/results.tgz" -C "$OUT" . && mv /tmp/results.tgz "$OUT/results.tgz"
    exit $status ;;
  *)
    echo "gpu_engine.sh: unknown phase '$phase' (stash, setup or run)" >&2; exit 2 ;;
esac
