#!/usr/bin/env bash
# The first run on Blackwell: the tcgen05 prefill (kernels/prefill/sm100/) and the fused MoE (the mma.sync
# kernels Hopper runs, which --moe-backend auto already picks on Blackwell), compiled, not run until now.
# For whoever has a B200 / GB200 (sm100, compute capability 10.0) or a Jetson Thor (sm110, 11.0):
#
#   bash scripts/blackwell_check.sh            # from a checkout, in the Python env that has torch
#
# It builds the extension for this GPU, runs the CPU checks (plan, Transform emulation, SASS), the sm100
# GPU tests (first light first, every step under a timeout: a hang is the likeliest first failure), the
# MoE GPU tests, the sanitizers on the small cases, `swordfish check` with the path enabled, and the
# benchmarks (auto and each forced path against cuBLAS, int4 and int8; the MoE layer of four models against
# a bf16 MoE through torch; both beside vLLM's own kernels, Marlin and Marlin MoE, when vLLM is installed in
# this environment: the comparison that says whether --linear-backend / --moe-backend auto should pick
# Swordfish here), then prints a Markdown report to paste into the issues (it is also written to
# $OUT/report.md; every step's output is in $OUT/).
#
# Knobs: OUT (default ./blackwell_out), PYTHON, SKIP_BUILD=1 (use the installed build), BENCH_MODEL
# (default llama-3-8b), BENCH_M (default 64,128,256,512,1024,2048,4096,8192), STEP_TIMEOUT (default 900 s).
# SWORDFISH_SM100_PREFILL=1 is set for the GPU steps: the path is opt-in until this script has passed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/blackwell_out}"
PY="${PYTHON:-python3}"
STEP_TIMEOUT="${STEP_TIMEOUT:-900}"
BENCH_MODEL="${BENCH_MODEL:-llama-3-8b}"
BENCH_M="${BENCH_M:-64,128,256,512,1024,2048,4096,8192}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
declare -a SUMMARY=()
failed=0

# step NAME CMD...: CMD under the timeout, output in $OUT/NAME.txt, one summary row.
step() {
  local name=$1 t0 rc verdict
  shift
  t0=$(date +%s)
  echo "== $name: $*"
  timeout --kill-after=30 "$STEP_TIMEOUT" "$@" > "$OUT/$name.txt" 2>&1
  rc=$?
  case $rc in
    0) verdict="pass" ;;
    124 | 137) verdict="TIMEOUT after ${STEP_TIMEOUT}s (a hang? see docs/PREFILL.md, What to look at first)" ;;
    *) verdict="FAIL (exit $rc)" ;;
  esac
  [ "$rc" -ne 0 ] && failed=1
  local last
  last=$(tail -n 1 "$OUT/$name.txt" | tr "|" "/" | cut -c1-120)
  SUMMARY+=("| $name | $verdict | $(( $(date +%s) - t0 )) s | $last |")
  echo "   $verdict"
  return "$rc"
}

CC=$("$PY" -c 'import torch; c = torch.cuda.get_device_capability(); print(f"{c[0]}.{c[1]}")' 2> /dev/null || echo none)
case "$CC" in
  10.0) ARCH=100a ;;
  11.0) ARCH=110a ;;
  *)
    echo "blackwell_check: this needs a B200 / GB200 (compute capability 10.0) or a Jetson Thor (11.0) under a" \
         "CUDA 13 driver; torch reports '$CC'." >&2
    exit 2 ;;
esac
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1
  "$PY" -c 'import torch; p = torch.cuda.get_device_properties(0); print("torch", torch.__version__, "cuda",
torch.version.cuda, p.name, "cc", torch.cuda.get_device_capability(), p.multi_processor_count, "SMs")'
  git rev-parse --short=12 HEAD 2> /dev/null || echo "commit unknown"
} > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  SWORDFISH_CUDA_ARCHS="$ARCH" SWORDFISH_PTXAS_VERBOSE=ON CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    step build "$PY" -m pip install --no-build-isolation --no-deps -v -e . \
    || { echo "build failed: $OUT/build.txt"; }
fi
"$PY" -c 'import swordfish_backend.ops as o; print("extension:", o.has_extension(), o.extension_error() or "",
o.build_info())' 2>&1 | tee "$OUT/extension.txt"

# CPU side first: the plan math, the Transform emulation and the SASS of this checkout.
step cpu_checks "$PY" -m pytest -q -p no:cacheprovider tests/test_prefill_sm100_host.py -rs -s

export SWORDFISH_SM100_PREFILL=1
# One tile, one k stage, before anything larger: a hang here is the 2-SM wiring, not a shape.
step first_light "$PY" -m pytest -q -p no:cacheprovider -x "tests/test_prefill_sm100_gpu.py::test_first_light"
step gpu_tests "$PY" -m pytest -q -p no:cacheprovider tests/test_prefill_sm100_gpu.py -rf
step other_gpu_tests "$PY" -m pytest -q -p no:cacheprovider tests/test_ops_gpu.py tests/test_decode_gpu.py \
  tests/test_dense_gpu.py tests/test_dispatch.py -rf
MOE_TESTS=(tests/test_moe_gpu.py tests/test_moe_kernels_gpu.py tests/test_moe_act_order_shards_gpu.py)
step moe_gpu_tests "$PY" -m pytest -q -p no:cacheprovider "${MOE_TESTS[@]}" -rf
if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck synccheck; do
    step "sanitize_$tool" compute-sanitizer --tool "$tool" --error-exitcode 9 "$PY" -m pytest -q -p no:cacheprovider \
      tests/test_prefill_sm100_gpu.py -m sanitize
    step "sanitize_moe_$tool" compute-sanitizer --tool "$tool" --error-exitcode 9 "$PY" -m pytest -q \
      -p no:cacheprovider "${MOE_TESTS[@]}" -m sanitize
  done
fi
# vLLM's kernels beside ours where vLLM is installed here (swordfish bench --peers).
PEERS=()
"$PY" -c 'import vllm' > /dev/null 2>&1 && PEERS=(--peers)
step check "$PY" -m swordfish_backend check --require-gpu --quick
step bench_int4 "$PY" -m swordfish_backend bench --model "$BENCH_MODEL" --bits 4 --m "$BENCH_M" ${PEERS[@]+"${PEERS[@]}"} \
  --json "$OUT/bench_int4.json" --png "$OUT/bench_int4.png" --quiet
step bench_int8 "$PY" -m swordfish_backend bench --model "$BENCH_MODEL" --bits 8 --m "$BENCH_M" ${PEERS[@]+"${PEERS[@]}"} \
  --json "$OUT/bench_int8.json" --png "$OUT/bench_int8.png" --quiet
step bench_moe "$PY" -m swordfish_backend bench --moe --rounds 3 ${PEERS[@]+"${PEERS[@]}"} \
  --json "$OUT/bench_moe.json" --png "$OUT/bench_moe.png" --quiet

{
  echo "### Blackwell: the tcgen05 prefill and the fused MoE, first run ($(head -n 1 "$OUT/device.txt"))"
  echo
  echo '```'
  cat "$OUT/device.txt"
  echo '```'
  echo
  echo "| step | result | time | last line |"
  echo "|---|---|---|---|"
  printf '%s\n' "${SUMMARY[@]}"
  echo
  grep -h -E "registers|UTCHMMA" "$OUT/cpu_checks.txt" 2> /dev/null | sed 's/^ */    /' | head -20
  for b in bench_int4 bench_int8 bench_moe; do
    if [ -f "$OUT/$b.json" ]; then
      echo
      echo '```'
      "$PY" -m swordfish_backend bench --from-json "$OUT/$b.json" --png "" 2>&1
      echo '```'
    fi
  done
  if [ -f "$OUT/bench_moe.json" ]; then
    echo
    echo '```'
    "$PY" benchmarks/moe_verdict.py "$OUT/bench_moe.json" 2>&1
    echo '```'
  fi
  echo
  echo "Outputs: $OUT (one file per step). Paste this into issues #35 (prefill) and #39 (MoE)."
} > "$OUT/report.md"
echo
cat "$OUT/report.md"
exit "$failed"
