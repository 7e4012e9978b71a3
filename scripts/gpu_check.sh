#!/usr/bin/env bash
# One device call on the H200 machine: install carried wheels, build for
# sm_90a, run every test (GPU tests included), the benchmark CLI if present,
# and compute-sanitizer memcheck + racecheck on the tests marked `sanitize`.
# Results go to $OUT (at most 8 files, flat):
#   gpu_check.log  stage summary and timings     build.log     pip/CMake/nvcc output
#   pytest.log     the full test run              junit.xml     per-test results and recorded numbers
#   sanitize.log   memcheck + racecheck           bench.log, bench.json, bench.png (when the CLI exists)
#
# Usage (from the repository root, device tool with carry [".whl"]):
#   bash scripts/gpu_check.sh                 # all stages
#   STAGES="build test" bash scripts/gpu_check.sh
#   STAGES="prebuilt test" bash scripts/gpu_check.sh   # carry prebuilt/_C.so (built here, see CONTRIBUTING)
#   PYTEST_ARGS="-k prepack" BENCH_ARGS="--preset llama-3-8b" bash scripts/gpu_check.sh
# The whole call must fit the device tool's 10-minute limit: every stage runs
# under `timeout`, at most its own limit (seconds: BUILD_TIMEOUT, TEST_TIMEOUT,
# BENCH_TIMEOUT, SAN_TIMEOUT) and at most what is left of DEADLINE (default
# 560 s from the start); a stage with under 20 s left is skipped.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/gpu_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
STAGES="${STAGES:-build test bench sanitize}"
export PYTHONUNBUFFERED=1
export SWORDFISH_CUDA_ARCHS="${SWORDFISH_CUDA_ARCHS:-90a}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
SUMMARY="$OUT/gpu_check.log"
START=$(date +%s)
status=0

say() { printf '[%4ss] %s\n' "$(( $(date +%s) - START ))" "$*" | tee -a "$SUMMARY"; }
has_stage() { [[ " $STAGES " == *" $1 "* ]]; }
DEADLINE="${DEADLINE:-560}"
# budget LIMIT: seconds a stage may take now (0: skip it).
budget() {
  local left=$(( DEADLINE - ($(date +%s) - START) - 10 ))
  local b=$(( $1 < left ? $1 : left ))
  [ "$b" -lt 20 ] && b=0
  echo "$b"
}
# within LIMIT CMD...: run CMD under timeout (exit 124 when cut off or skipped).
within() {
  local b
  b=$(budget "$1")
  shift
  if [ "$b" -eq 0 ]; then
    echo "skipped: the ${DEADLINE}s deadline leaves no time for: $*"
    return 124
  fi
  timeout "$b" "$@"
}

# The checkout's git HEAD as this machine sees it: a copied tree may carry a stale .git (the device
# copy did, 2026-12-02), so the extension's own _C_build.json commit, printed below, is the one that
# says what was measured.
say "gpu_check: stages '$STAGES', archs $SWORDFISH_CUDA_ARCHS, tree HEAD (git, may be stale in a copy) $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$SUMMARY"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' 2>&1 \
  | tee -a "$SUMMARY"

if has_stage prebuilt; then
  # A build carried packed (the device's 64 MiB limit) is unpacked first.
  # shellcheck source=scripts/device_call.sh
  (source scripts/device_call.sh && dc_unpack)
  # A _C.so compiled on the CPU machine against torch 2.14's headers (stable
  # ABI target 2.11) and carried as prebuilt/_C.so: used instead of building here.
  [ -f prebuilt/_C_build.json ] && cp prebuilt/_C_build.json swordfish_backend/_C_build.json
  cp prebuilt/_C.so swordfish_backend/_C.so && say "using the carried prebuilt/_C.so" \
    || { say "prebuilt stage: no prebuilt/_C.so to use"; status=1; }
fi

if has_stage build; then
  if compgen -G ".whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps .whl/*.whl >>"$OUT/build.log" 2>&1 \
      && say "installed carried wheels: $(cd .whl && ls *.whl | tr '\n' ' ')" \
      || say "WARNING: installing .whl/*.whl failed (see build.log)"
  fi
  t0=$(date +%s)
  within "${BUILD_TIMEOUT:-300}" "$PY" -m pip install --no-build-isolation --no-deps -v -e . >>"$OUT/build.log" 2>&1
  rc=$?
  say "build: exit $rc in $(( $(date +%s) - t0 ))s (SWORDFISH_CUDA_ARCHS=$SWORDFISH_CUDA_ARCHS, $CMAKE_BUILD_PARALLEL_LEVEL jobs)"
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -n -E 'error|FAILED' "$OUT/build.log" | head -20 | tee -a "$SUMMARY"
  fi
fi

"$PY" - <<'PY' 2>&1 | tee -a "$SUMMARY"
import swordfish_backend.ops as o
print("extension:", o.has_extension(), o.extension_error() or "", o.build_info())
PY

if has_stage test; then
  t0=$(date +%s)
  # shellcheck disable=SC2086
  within "${TEST_TIMEOUT:-300}" "$PY" -m pytest -q tests -rs --junitxml="$OUT/junit.xml" ${PYTEST_ARGS:-} \
    >"$OUT/pytest.log" 2>&1
  rc=$?
  say "pytest: exit $rc in $(( $(date +%s) - t0 ))s: $(tail -n 1 "$OUT/pytest.log")"
  [ "$rc" -ne 0 ] && status=1
  # Numbers the tests recorded (record_property), e.g. prepack bandwidth.
  "$PY" - "$OUT/junit.xml" <<'PY' 2>/dev/null | tee -a "$SUMMARY"
import sys, xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).iter("testcase"):
    for prop in case.iter("property"):
        print(f"  {case.get('name')}: {prop.get('name')} = {prop.get('value')}")
PY
fi

if has_stage probe; then
  # Argument errors inside the ops must reach Python as exceptions (the
  # installed build, and a carried prebuilt/_C.so when there is one).
  within 120 "$PY" scripts/probe_op_errors.py 2>&1 | tee -a "$SUMMARY"
  if [ -f prebuilt/_C.so ]; then
    say "probe with the carried prebuilt/_C.so:"
    within 120 "$PY" scripts/probe_op_errors.py "$ROOT/prebuilt/_C.so" 2>&1 | tee -a "$SUMMARY"
  fi
fi

if has_stage bench; then
  if "$PY" -c 'import swordfish_backend.cli' >/dev/null 2>&1 && "$PY" -m swordfish_backend bench --help >/dev/null 2>&1; then
    work="$(mktemp -d)"
    t0=$(date +%s)
    # shellcheck disable=SC2086
    (cd "$work" && within "${BENCH_TIMEOUT:-120}" "$PY" -m swordfish_backend bench ${BENCH_ARGS:-}) \
      >"$OUT/bench.log" 2>&1
    rc=$?
    say "bench: exit $rc in $(( $(date +%s) - t0 ))s"
    [ "$rc" -ne 0 ] && status=1
    # Flat copies of what it wrote (first JSON and first PNG only: $OUT holds 8 files).
    f=$(find "$work" -name '*.json' -type f | head -n 1); [ -n "$f" ] && cp "$f" "$OUT/bench.json"
    f=$(find "$work" -name '*.png' -type f | head -n 1); [ -n "$f" ] && cp "$f" "$OUT/bench.png"
  else
    say "bench: skipped (swordfish_backend.cli / 'python -m swordfish_backend bench' not available yet)"
  fi
fi

if has_stage sanitize; then
  if command -v compute-sanitizer >/dev/null 2>&1; then
    for tool in memcheck racecheck synccheck; do
      t0=$(date +%s)
      echo "===== compute-sanitizer --tool $tool (pytest -m sanitize)" >>"$OUT/sanitize.log"
      within "${SAN_TIMEOUT:-120}" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 50 \
        "$PY" -m pytest -q -m sanitize -p no:cacheprovider tests >>"$OUT/sanitize.log" 2>&1
      rc=$?
      summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize.log" | tail -n 1)
      say "sanitize $tool: exit $rc in $(( $(date +%s) - t0 ))s ${summary}"
      [ "$rc" -ne 0 ] && status=1
    done
  else
    say "sanitize: skipped (compute-sanitizer not on PATH)"
  fi
fi

say "gpu_check: $( [ "$status" -eq 0 ] && echo PASS || echo FAIL ) in $(( $(date +%s) - START ))s; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit "$status"
