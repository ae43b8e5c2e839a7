#!/usr/bin/env bash
# The H200 runs of benchmarks/results/gpu-real-size-0.30.0: two device calls after the carry's first two parts are
# stashed (`bash benchmarks/gpu_engine.sh stash .gpucarry0`, then `.gpucarry1`, one call each).
#
#   bash benchmarks/gpu_real_size.sh call3 SHA256 CARRYDIR  # setup; the scaffolded patterns' server tier and
#                                                           # two-stage offline, beside the harness tier on CUDA
#   bash benchmarks/gpu_real_size.sh call4                  # alone: CUDA-graph bound, harness overhead; then
#                                                           # Qwen3-TTS at its real shapes through the engine tier
#
# Everything lands in /tmp/r/<call>/ and comes back as $OUT/<call>.tgz (the device tool returns 8 files at most).
# Each part runs in its own process group with a deadline, so a hung engine cannot cost the call's results.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:?OUT}"
phase="${1:?phase: call3 or call4}"
R="/tmp/r/$phase"
mkdir -p "$R"
export PYTHONUNBUFFERED=1

limit() {  # limit SECONDS CMD...: run CMD in a new process group, end the whole group at the deadline
  local secs=$1 pid watcher rc
  shift
  setsid "$@" &
  pid=$!
  (sleep "$secs"; kill -TERM -- "-$pid" 2>/dev/null; sleep 5; kill -KILL -- "-$pid" 2>/dev/null) &
  watcher=$!
  wait "$pid"
  rc=$?
  kill "$watcher" 2>/dev/null
  return $rc
}

shim() {  # the repo's folders as the omnitts package (no pip install on the device machine)
  mkdir -p /tmp/hs/omnitts
  for d in knowledge validators reference_models templates scaffold; do ln -sfn "$REPO/$d" "/tmp/hs/omnitts/$d"; done
  mkdir -p /tmp/hs/omnitts_shim-0.0.dist-info  # the reference catalog's entry point (the plugin finds catalogs so)
  printf 'Metadata-Version: 2.1\nName: omnitts-shim\nVersion: 0.0\n' > /tmp/hs/omnitts_shim-0.0.dist-info/METADATA
  printf '[omnitts.model_catalogs]\nreference = omnitts.reference_models.names\n' \
    > /tmp/hs/omnitts_shim-0.0.dist-info/entry_points.txt
}

pack() {
  nvidia-smi > "$R/nvidia-smi-end.txt" 2>&1
  tar -czf "$OUT/$phase.tgz" -C "$R" . && ls -la "$OUT"
}

case "$phase" in
  call3)
    sha="${2:?SHA256}"; dir="${3:?CARRYDIR}"
    started=$SECONDS
    bash "$REPO/benchmarks/gpu_engine.sh" setup "$sha" "$dir" > "$R/setup.log" 2>&1 || { cat "$R/setup.log"; exit 3; }
    echo "setup: $((SECONDS - started)) s"
    shim
    harness() {
      OUT="$R/harness" REPEATS=7 bash "$REPO/benchmarks/gpu_validators.sh" > "$R/harness.log" 2>&1
      PYTHONPATH=/tmp/hs python3 "$REPO/benchmarks/sync_sites.py" --device cuda --out "$R/sync_sites.json" \
        > "$R/sync_sites.log" 2>&1
    }
    limit 470 bash -c "$(declare -f harness); R=$R REPO=$REPO; harness" &
    hpid=$!
    limit 480 env PARALLEL=1 OUT="$R/scaffold" bash "$REPO/benchmarks/gpu_engine.sh" run \
      gpu_single_stage:server gpu_two_stage:server gpu_native_ar:server gpu_two_stage:offline
    echo "scaffold engine tier: exit $?, $((SECONDS - started)) s"
    wait "$hpid"
    echo "harness tier: exit $?, $((SECONDS - started)) s"
    cat "$R/scaffold/summary.txt" "$R/harness/summary.md" "$R/sync_sites.log" 2>&1 | cut -c1-400
    pack ;;
  call4)
    started=$SECONDS
    shim
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$R/leftover-gpu-processes.txt" 2>&1
    export PYTHONPATH=/tmp/hs
    limit 100 python3 "$REPO/benchmarks/cuda_graph_bound.py" --model ref_two_stage --repeats 5 \
      --out "$R/cuda_graph_bound.json" > "$R/cuda_graph_bound.log" 2>&1
    echo "cuda_graph_bound: exit $?, $((SECONDS - started)) s"
    limit 150 python3 "$REPO/benchmarks/harness_overhead.py" --device cuda --repeats 7 \
      --out "$R/harness_overhead.json" > "$R/harness_overhead.log" 2>&1
    echo "harness_overhead: exit $?, $((SECONDS - started)) s"
    # Qwen3-TTS at its real shapes, built by code in the engine's own environment, dummy weights, the release's
    # deploy config (bf16, CUDA graphs, async chunks) with greedy sampling
    limit 120 env PYTHONPATH=/tmp/hs:/tmp/site python3 -m omnitts.validators.engine.upstream build --tree /tmp/site \
      --model qwen3_tts --size real --out /tmp/q3real > "$R/q3real-build.log" 2>&1
    echo "qwen3 real build: exit $?, $((SECONDS - started)) s"
    cp -r /tmp/q3real "$R/q3real-dir" 2>/dev/null && rm -f "$R/q3real-dir/tokenizer.json"
    info='{"task_type":"CustomVoice","speaker":"real","language":"english","max_new_tokens":80}'
    limit $((560 - (SECONDS - started))) env PARALLEL=1 OUT="$R/q3real" \
      ENGINE_ARGS="--checkpoint /tmp/q3real --dummy-weights --omnitts-request-info $info" \
      bash "$REPO/benchmarks/gpu_engine.sh" run qwen3_tts:offline qwen3_tts:server
    echo "qwen3 real engine tier: exit $?, $((SECONDS - started)) s"
    cat "$R/cuda_graph_bound.log" "$R/harness_overhead.log" "$R/q3real/summary.txt" 2>&1 | cut -c1-300 | tail -60
    pack ;;
  *)
    echo "gpu_real_size.sh: unknown phase '$phase' (call3 or call4)" >&2; exit 2 ;;
esac
