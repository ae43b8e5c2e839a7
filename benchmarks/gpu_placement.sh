#!/usr/bin/env bash
# Issue 13 on the GPU machine: xdist workers pinned to GPUs, one model per worker, a two-stage model's stages on two
# GPUs, and the device-placement check on its seeded bug. Results go to $OUT.
#
#   OUT=/some/dir bash benchmarks/gpu_placement.sh              # one H200: 3 workers share it
#   OUT=/some/dir GPUS=0,1 bash benchmarks/gpu_placement.sh     # two GPUs (nvidia-h200-x2): 4 workers, stages split
#
# Same set-up as benchmarks/gpu_validators.sh (no pip install of this repo: a symlink shim maps the folders onto
# omnitts.*). Writes $OUT/env.txt, $OUT/pytest.log, $OUT/matrix/harness-<time>/{results.json,checklist.md,...} and
# $OUT/summary.txt, whose last line is PLACEMENT OK or PLACEMENT FAILED (exit status 0 / 1).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${OUT:-$REPO/omnitts-out/gpu-placement}"
PY="${PYTHON:-python3}"
VISIBLE="$("$PY" -c 'import torch; print(torch.cuda.device_count())')"
GPUS="${GPUS:-$(seq -s, 0 $((VISIBLE - 1)))}"
NGPU="$(echo "$GPUS" | tr ',' '\n' | grep -c .)"
WORKERS="${WORKERS:-$([ "$NGPU" -ge 2 ] && echo 4 || echo 3)}"
MODELS="${MODELS:-ref_two_stage,ref_single_stage,ref_native_ar,ref_two_stage@codes-on-device}"
mkdir -p "$OUT"

SHIM="$(mktemp -d)"
trap 'rm -rf "$SHIM"' EXIT
mkdir -p "$SHIM/omnitts"
for d in knowledge validators reference_models templates scaffold; do
  [ -d "$REPO/$d" ] && ln -s "$REPO/$d" "$SHIM/omnitts/$d"
done
export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"

{
  date -u
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1 || true
  "$PY" -c 'import sys, torch, pytest, xdist; print("python", sys.version.split()[0], "torch", torch.__version__, "pytest", pytest.__version__, "xdist", xdist.__version__)'
  echo "gpus $GPUS workers $WORKERS models $MODELS"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

cd "$REPO"
"$PY" -m pytest validators --model "$MODELS" --device cuda --gpus "$GPUS" -n "$WORKERS" \
  --omnitts-out "$OUT/matrix" --check-timeout 300 -v -rfs -p no:cacheprovider > "$OUT/pytest.log" 2>&1
echo "pytest exit $? (1 expected: the seeded mutant fails device.placement)" | tee -a "$OUT/env.txt"
tail -25 "$OUT/pytest.log"

"$PY" - "$(ls -d "$OUT"/matrix/harness-*/ | tail -1)results.json" "$NGPU" <<'EOF' | tee "$OUT/summary.txt"
import json
import sys

models = json.load(open(sys.argv[1]))["models"]
ngpu = int(sys.argv[2])
ok = True


def expect(cond, line):
    global ok
    ok = ok and cond
    print(("ok   " if cond else "FAIL ") + line)


for name, res in sorted(models.items()):
    workers = sorted({r["worker"] for r in res["ran_on"]})
    devices = sorted({r["device"] for r in res["ran_on"]})
    expect(len(workers) == 1, f"{name}: ran on one worker {workers} ({devices})")
good = models["ref_two_stage"]
expect(good["results"].get("device.placement") == "passed", "ref_two_stage: device.placement passed")
placed = good["metrics"].get("device.placement", {})
stages = placed.get("stage_devices")
split = ngpu >= 2
expect(bool(placed.get("split")) == split and stages and len(set(stages)) == (2 if split else 1),
       f"ref_two_stage: stages on {stages} (two GPUs: two devices)")
bad = models["ref_two_stage@codes-on-device"]
expect(bad["results"].get("device.placement") == "failed", "ref_two_stage@codes-on-device: device.placement failed")
print("failure message:", (bad["failures"].get("device.placement") or "")[:600])
others = {c: s for c, s in bad["results"].items() if s == "failed" and c != "device.placement"}
print("other checks failing on the mutant:", others or "none")
for name in ("ref_single_stage", "ref_native_ar"):
    expect("failed" not in models[name]["results"].values(), f"{name}: no check failed")
print("PLACEMENT OK" if ok else "PLACEMENT FAILED")
sys.exit(0 if ok else 1)
EOF
