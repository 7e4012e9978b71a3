#!/usr/bin/env bash
# One device call: the stages named in STAGES, each under a timeout within the call's DEADLINE.
#
#   STAGES="prebuilt test check sanitize" bash scripts/gpu_check.sh
#   STAGES="prebuilt sweep" bash scripts/gpu_check.sh                  # a new baseline (benchmarks/baselines)
#   STAGES="ab" VARIANTS="main v1" ROUNDS=4 bash scripts/gpu_check.sh  # two carried builds, interleaved
#
# Stages (run in this order whatever the order in STAGES; default "build test check bench sanitize"):
#   prebuilt  use a build from the CPU machine: unpack prebuilt/variants.tar.xz, install prebuilt/_C.so
#             and its _C_build.json (VARIANT=NAME: prebuilt/NAME/ instead). Carry ["prebuilt"].
#   build     build here: install carried .whl/*.whl, then pip install -e . (SWORDFISH_CUDA_ARCHS, default 90a).
#   probe     scripts/probe_op_errors.py: argument errors inside the ops reach Python as exceptions.
#   test      pytest -v tests (TEST_PATHS instead of tests; PYTEST_ARGS; -n 16 where pytest-xdist is installed;
#             --durations=30).
#             The *_ARGS and CMD knobs are read by bash, so quoting inside them works:
#             PYTEST_ARGS='-k "gather or act_order"'.
#   check     swordfish check --require-gpu (CHECK_ARGS).
#   bench     swordfish bench (BENCH_ARGS): bench.txt, bench.json, bench.png.
#   sweep     the baseline of benchmarks/baselines: bench_dispatch.py int4 + int8, every path, SWEEP_M, 5 rounds;
#             bench_decode.py; table_verdict.py and target_bounds.py on the sweep. Into sweep/.
#   ab        each build of VARIANTS ("main" is prebuilt/_C.so, V is prebuilt/V/_C.so) timed in ROUNDS
#             interleaved rounds (order reversed every other round): swordfish bench with AB_PREFILL_ARGS
#             (and AB_PREFILL8_ARGS), bench_decode.py with AB_DECODE_ARGS ('' skips one); AB_TESTS run
#             against every variant but main first; benchmarks/ab_compare.py against the first. Into ab/.
#   profile   PROFILE_KERNEL=REGEX PROFILE_CMD="python ...": one full ncu profile of the first matching
#             launch, its SASS page and benchmarks/ncu_stalls.py's reading. Into profile/.
#   cmd       CMD="...": any command, its output in cmd.txt.
#   sanitize  compute-sanitizer memcheck, racecheck, synccheck over pytest -m sanitize (SANITIZE_ARGS).
#
# Results: $OUT/gpu_check.log (one line per stage) and $OUT/results.tgz (every stage's files, re-packed
# after each stage, so a call cut short still returns what it finished; the device returns 8 files).
# A second run in the same call (cmd1 && cmd2) writes gpu_check-2.log and results-2.tgz, and so on,
# instead of overwriting the first run's.
# Each stage runs under `timeout`: at most its own limit (BUILD_TIMEOUT, TEST_TIMEOUT, ...) and at most
# what is left of DEADLINE (default 560 s, inside the device's 10-minute limit); under 20 s left, it is
# skipped. The tree plus what is carried must stay under the device's 64 MiB: carry builds packed
# (docs/CONTRIBUTING.md).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/gpu_out}"
R="${WORK:-/tmp/gpu_check}"
rm -rf "$R" && mkdir -p "$OUT" "$R"
RUN=""  # "", "-2", "-3", ...: the first name no earlier run in this $OUT has taken
for n in 2 3 4 5 6 7 8 9; do [ -e "$OUT/results$RUN.tgz" ] || [ -e "$OUT/gpu_check$RUN.log" ] || break; RUN="-$n"; done
PY="${PYTHON:-python3}"
STAGES="${STAGES:-build test check bench sanitize}"
export PYTHONUNBUFFERED=1 PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export SWORDFISH_CUDA_ARCHS="${SWORDFISH_CUDA_ARCHS:-90a}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
DEADLINE="${DEADLINE:-560}"
START=$(date +%s)
status=0

say() { printf '[%4ss] %s\n' "$(( $(date +%s) - START ))" "$*" | tee -a "$R/gpu_check.log"; }
pack() { cp "$R/gpu_check.log" "$OUT/gpu_check$RUN.log"; tar czf "$OUT/results$RUN.tgz" -C "$R" .; }
has_stage() { [[ " $STAGES " == *" $1 "* ]]; }
# within LIMIT CMD...: CMD under timeout, at most LIMIT seconds and what DEADLINE leaves (exit 124 when
# cut off or skipped).
within() {
  local left=$(( DEADLINE - ($(date +%s) - START) - 10 )) b=$1
  shift
  [ "$left" -lt "$b" ] && b=$left
  if [ "$b" -lt 20 ]; then echo "skipped: the ${DEADLINE}s deadline leaves no time for: $*"; return 124; fi
  timeout "$b" "$@"
}
# stage NAME LIMIT CMD...: CMD's output in NAME.txt, one summary line, results re-packed.
stage() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  mkdir -p "$R/$(dirname "$name")"
  within "$limit" "$@" > "$R/$name.txt" 2>&1
  rc=$?
  say "$name: exit $rc in $(( $(date +%s) - t0 ))s: $(tail -n 1 "$R/$name.txt")"
  [ "$rc" -ne 0 ] && status=1
  pack
  return "$rc"
}
# use_build NAME: install a carried build ("main": prebuilt/, else prebuilt/NAME/) and its build record
# (the tests read cuda_archs from it to know whether the prefill path exists).
use_build() {
  local dir=prebuilt
  [ "$1" != main ] && dir="prebuilt/$1"
  [ -f "$dir/_C.so" ] || { say "no build for $1 ($dir/_C.so)"; return 1; }
  cp "$dir/_C.so" swordfish_backend/_C.so
  rm -f swordfish_backend/_C_build.json
  [ -f "$dir/_C_build.json" ] && cp "$dir/_C_build.json" swordfish_backend/_C_build.json
  return 0
}

# A copied tree may carry a stale .git: the extension's own _C_build.json, printed below, says what was measured.
say "gpu_check: stages '$STAGES', tree HEAD $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$R/gpu_check.log"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' \
  2>&1 | tee -a "$R/gpu_check.log"

if has_stage prebuilt || has_stage ab; then
  [ -f prebuilt/variants.tar.xz ] && tar xJf prebuilt/variants.tar.xz -C prebuilt
fi
if has_stage prebuilt; then
  use_build "${VARIANT:-main}" && say "using the carried build ${VARIANT:-main}" || status=1
fi
if has_stage build; then
  if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps .whl/*.whl > "$R/wheels.txt" 2>&1 || say "installing .whl/*.whl failed"
  fi
  stage build "${BUILD_TIMEOUT:-300}" "$PY" -m pip install --no-build-isolation --no-deps -v -e . \
    || grep -n -E 'error|FAILED' "$R/build.txt" | head -20 | tee -a "$R/gpu_check.log"
fi
"$PY" -c 'import swordfish_backend.ops as o; print("extension:", o.has_extension(), o.extension_error() or "", o.build_info())' \
  2>&1 | tee -a "$R/gpu_check.log"

has_stage probe && stage probe 120 "$PY" scripts/probe_op_errors.py
if has_stage test; then
  workers=""
  "$PY" -c 'import xdist' 2> /dev/null && workers="-n ${PYTEST_WORKERS:-16}"
  # One CPU thread per worker: 16 workers x torch's 16 OpenMP threads left the CPU-side act-order tests (fp64
  # reference matmuls) stalled for minutes on the 16 cores (the f2c915b run, RESULTS.md [gpu-suite]).
  # -v: a line per finished test, so a run cut off by its limit still names what passed and failed.
  stage tests "${TEST_TIMEOUT:-560}" bash -c "OMP_NUM_THREADS=\${OMP_NUM_THREADS:-1} $PY -m pytest -v -p no:cacheprovider $workers ${TEST_PATHS:-tests} -rf --durations=30 ${PYTEST_ARGS:-}"
fi
has_stage check && stage check "${CHECK_TIMEOUT:-120}" bash -c "$PY -m swordfish_backend check --require-gpu ${CHECK_ARGS:-}"
if has_stage bench; then
  stage bench "${BENCH_TIMEOUT:-120}" \
    bash -c "$PY -m swordfish_backend bench --json '$R/bench.json' --png '$R/bench.png' ${BENCH_ARGS:-}"
fi
if has_stage sweep; then
  SWEEP_M="${SWEEP_M:-1,16,24,32,40,48,56,64,72,80,96,128,192,256,384,512,768,1024,2048,4096,6144,8192,12288}"
  stage sweep/dispatch "${SWEEP_TIMEOUT:-300}" "$PY" benchmarks/bench_dispatch.py --bits 4 8 --m "$SWEEP_M" \
    --rounds 5 --out "$R/sweep"
  stage sweep/decode 150 "$PY" benchmarks/bench_decode.py --bits 4 8 --M 1 8 9 16 32 64 128 --out "$R/sweep/decode.json"
  stage sweep/table_verdict 60 "$PY" benchmarks/table_verdict.py "$R"/sweep/dispatch_int{4,8}.json
  stage sweep/target_bounds 60 "$PY" benchmarks/target_bounds.py "$R"/sweep/dispatch_int{4,8}.json
fi
if has_stage ab; then
  read -r -a V <<< "${VARIANTS:-main}"
  declare -A ARGS=([prefill]="${AB_PREFILL_ARGS---model llama-3-70b,llama-3-8b --m 64,128,256,512,1024 --paths prefill}"
                   [prefill8]="${AB_PREFILL8_ARGS-}" [decode]="${AB_DECODE_ARGS---bits 4 8 --M 1 16 32 48 --no-cublas}")
  for v in "${V[@]}"; do
    [ "$v" = main ] || [ -z "${AB_TESTS-tests/test_prefill_gpu.py tests/test_decode_gpu.py}" ] && continue
    use_build "$v" && stage "ab/tests_$v" 240 \
      bash -c "OMP_NUM_THREADS=\${OMP_NUM_THREADS:-1} $PY -m pytest -q -n 16 -p no:cacheprovider ${AB_TESTS-tests/test_prefill_gpu.py tests/test_decode_gpu.py} -rf"
  done
  for r in $(seq 1 "${ROUNDS:-2}"); do
    order=("${V[@]}")
    if [ $((r % 2)) -eq 0 ]; then order=(); for ((i = ${#V[@]} - 1; i >= 0; i--)); do order+=("${V[i]}"); done; fi
    for v in "${order[@]}"; do
      use_build "$v" || continue
      for b in prefill prefill8 decode; do
        [ -n "${ARGS[$b]}" ] || continue
        mkdir -p "$R/ab/$b"
        if [ "$b" = decode ]; then
          within 150 bash -c "$PY benchmarks/bench_decode.py ${ARGS[$b]} --rounds 1 --out '$R/ab/$b/${v}_$r.json'" \
            > "$R/ab/$b/${v}_$r.txt" 2>&1
        else
          within 150 bash -c "$PY -m swordfish_backend bench ${ARGS[$b]} -q --png '' --json '$R/ab/$b/${v}_$r.json'" \
            > "$R/ab/$b/${v}_$r.txt" 2>&1
        fi
      done
      say "ab round $r $v done"
    done
    pack
  done
  for b in prefill prefill8 decode; do
    compgen -G "$R/ab/$b/*.json" > /dev/null && stage "ab/ab_$b" 60 "$PY" benchmarks/ab_compare.py "$R/ab/$b" --base "${V[0]}"
  done
  use_build main > /dev/null 2>&1
fi
if has_stage profile; then
  mkdir -p "$R/profile"
  stage profile/ncu "${PROFILE_TIMEOUT:-120}" bash -c "ncu --clock-control none --set full --import-source no \
    -k 'regex:${PROFILE_KERNEL:?PROFILE_KERNEL=REGEX}' -c 1 -f -o '$R/profile/prof' ${PROFILE_CMD:?PROFILE_CMD=...}"
  ncu -i "$R/profile/prof.ncu-rep" > "$R/profile/details.txt" 2>&1
  ncu -i "$R/profile/prof.ncu-rep" --page source --csv --print-source sass > "$R/profile/sass.csv" 2>&1
  stage profile/stalls 60 "$PY" benchmarks/ncu_stalls.py "$R/profile/sass.csv" --top 25
fi
has_stage cmd && stage cmd "${CMD_TIMEOUT:-300}" bash -c "${CMD:?CMD=...}"
if has_stage sanitize; then
  if command -v compute-sanitizer > /dev/null 2>&1; then
    for tool in memcheck racecheck synccheck; do
      stage "san_$tool" "${SAN_TIMEOUT:-120}" bash -c "compute-sanitizer --tool $tool --error-exitcode 99 \
        --print-limit 50 $PY -m pytest -q -p no:cacheprovider -m sanitize tests ${SANITIZE_ARGS:-}"
    done
  else
    say "sanitize: skipped (compute-sanitizer not on PATH)"
  fi
fi

say "gpu_check: $( [ "$status" -eq 0 ] && echo PASS || echo FAIL ) in $(( $(date +%s) - START ))s"
pack
exit "$status"
