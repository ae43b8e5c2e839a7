#!/usr/bin/env bash
# The engine tier on the borrowed H200 the way a contributor runs it: one Python environment that has their vLLM
# (0.30.0, installed), their vLLM-Omni checkout (editable: a path entry, as `pip install -e` makes one) and omnitts
# (`pip install -e`), and nothing else: no PYTHONPATH, no OMNITTS_ENGINE_PYTHON. The engine tier must find the current
# Python able to run the tree's engine and use it as it is (validators/engine/install.py, engine_python step 2).
#
#   bash benchmarks/gpu_engine.sh stash DIR                                  # each carry part but the last, a call each
#   bash benchmarks/gpu_contributor_env.sh setup SHA256 DIR MODEL:TIER ...   # the last part, install, sessions at once
#   bash benchmarks/gpu_contributor_env.sh run MODEL:TIER ...                # more sessions on the same warm machine
# MODEL:TIER: TIER is offline, server or harness (MODEL may list several, comma-separated, for the harness).
#
# The carry (made on the CPU machine; benchmarks/results/gpu-contributor-env-0.30.0/README.md): a tar.xz of
#   site/      vllm 0.30.0 and the packages the H200's Python lacks (or pins otherwise), installed with pip --target
#   checkout/  vLLM-Omni 0.30.0's package with three scaffolded models (the contributor's working copy)
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
C=/tmp/contributor
PY=python3  # the machine's own Python environment (/opt/torch/.venv on the H200): the contributor's, as it is
OUT="${OUT:?OUT}"
phase="${1:?phase: setup or run}"; shift
mkdir -p "$OUT"

case "$phase" in
  setup)  # the last carry part: join, check, extract, install into the machine's Python as a contributor would
    sha="${1:?SHA256}"; dir="${2:?DIR}"; shift 2
    mkdir -p /tmp/carry && cp "$dir"/part.* /tmp/carry/
    cat /tmp/carry/part.* > /tmp/carry.tar.xz
    echo "$sha  /tmp/carry.tar.xz" | sha256sum -c - || exit 3
    rm -rf "$C" && mkdir -p "$C" || exit 3
    { tar -xJf /tmp/carry.tar.xz -C "$C" 2>/dev/null \
      || "$PY" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' /tmp/carry.tar.xz "$C"; } || exit 3
    SP="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    # pip's own steps, by hand (no index here): uninstall what the carry pins otherwise, then the carried packages
    names=$(cd "$C/site" && ls -d *.dist-info | sed 's/-[^-]*\.dist-info$//')
    "$PY" -m pip uninstall -y $names > "$OUT/pip-uninstall.log" 2>&1
    cp -a "$C/site/." "$SP/" || exit 3
    echo "$C/checkout" > "$SP/vllm_omni_checkout.pth"  # their editable vLLM-Omni checkout (a path entry)
    if ! "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e "$REPO" > "$OUT/pip-omnitts.log" 2>&1; then
      # no setuptools to build with: what an editable install leaves, by hand (a path entry and omnitts's metadata)
      tail -3 "$OUT/pip-omnitts.log"; echo "omnitts: pip install -e failed; a path entry and a dist-info instead"
      S="$C/omnitts-editable"; mkdir -p "$S/omnitts" "$S/omnitts-0.1.0.dist-info"
      for d in console knowledge scaffold validators reference_models templates; do ln -s "$REPO/$d" "$S/omnitts/$d"; done
      printf 'Metadata-Version: 2.1\nName: omnitts\nVersion: 0.1.0\n' > "$S/omnitts-0.1.0.dist-info/METADATA"
      "$PY" -c 'import sys, tomllib; eps = tomllib.load(open(sys.argv[1], "rb"))["project"].get("entry-points", {})
print("".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in t.items()) for g, t in eps.items()))' \
        "$REPO/pyproject.toml" > "$S/omnitts-0.1.0.dist-info/entry_points.txt" || exit 3
      echo "$S" > "$SP/omnitts_editable.pth"
    fi
    echo "setup: $(grep -c Successfully "$OUT/pip-uninstall.log") packages replaced, $(ls -d "$C"/site/*.dist-info | wc -l) carried"
    ;;
  run) ;;
  *) echo "gpu_contributor_env.sh: unknown phase '$phase' (setup or run)" >&2; exit 2 ;;
esac
[ -d "$C/checkout" ] || { echo "no contributor environment on this machine: run the setup phase first" >&2; exit 3; }
unset PYTHONPATH OMNITTS_ENGINE_PYTHON
export OMNITTS_CACHE=/tmp/omc VLLM_USE_FLASHINFER_SAMPLER=0
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  "$PY" -c 'import sys, torch, transformers, vllm, vllm_omni, omnitts; print("python", sys.executable,
sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "vllm", vllm.__version__,
"vllm_omni", vllm_omni.__version__, vllm_omni.__file__, "omnitts", list(omnitts.__path__))' 2>&1 | tail -1
  echo "PYTHONPATH=${PYTHONPATH:-(unset)} OMNITTS_ENGINE_PYTHON=${OMNITTS_ENGINE_PYTHON:-(unset)}"
} > "$OUT/env.txt"
cat "$OUT/env.txt"
cd "$REPO"
one() {  # one pytest validators session; its line in summary.txt
  local model="${1%%:*}" tier="${1##*:}" started=$SECONDS rc args=()
  [ "$tier" = harness ] || args=(--omni-root "$C/checkout" --engine "$tier")
  "$PY" -m pytest validators "${args[@]}" --model "$model" --device cuda --omnitts-out "$OUT/$tier-${model//,/+}" \
    -q -rA -p no:cacheprovider > "$OUT/session-$tier-${model//,/+}.log" 2>&1
  rc=$?
  echo "$model $tier: exit $rc, $((SECONDS - started)) s, $(tail -1 "$OUT/session-$tier-${model//,/+}.log")" \
    | tee -a "$OUT/summary.txt"
  return $rc
}
status=0
pids=()
for job in "$@"; do one "$job" & pids+=($!); done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
grep -h "omnitts-engine-env" "$OUT"/session-*.log | sort | uniq -c | tee "$OUT/engine-python.txt"
for f in /tmp/omnitts-engine-*/*/*.log; do [ -f "$f" ] && cp "$f" "$OUT/$(basename "$(dirname "$(dirname "$f")")")-$(basename "$f")"; done
tar -czf /tmp/results.tgz -C "$OUT" . && find "$OUT" -mindepth 1 -delete && mv /tmp/results.tgz "$OUT/results.tgz"
exit $status
