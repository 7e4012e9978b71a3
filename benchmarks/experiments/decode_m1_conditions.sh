#!/usr/bin/env bash
# Why 70B M = 1 decode read ~1.2x slower inside the 2026-12-03-b results run than alone: the same
# build timed alone (--no-cublas, M = 1 only), with cuBLAS interleaved, with cuBLAS and M = 128
# interleaved (--order interleaved: per round decode then cuBLAS for each M, so each M = 1 point
# follows the previous round's M = 128 points), then alone again; nvidia-smi samples SM and memory
# clocks, power and throttle reasons every 100 ms alongside. One device call (carry .whl and
# prebuilt/ with _C.so and _C_build.json), about 60 s:
#   bash benchmarks/experiments/decode_m1_conditions.sh
# Answer (2026-12-03-c/experiments/m1_conditions/): the M = 128 points hold the board at its 700 W
# power cap and the M = 1 point after them runs at a lower SM clock.
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/decode_m1_conditions}"; mkdir -p "$OUT"
STAGES=prebuilt OUT="$OUT" bash scripts/gpu_check.sh > /dev/null 2>&1  # installs prebuilt/_C.so and its build record
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 100 > "$OUT/smi.csv" 2>&1 &
smi=$!
run() {
  echo "=== $1 $(date +%T.%N)" >> "$OUT/conditions.txt"; shift
  timeout 40 python benchmarks/bench_decode.py --shapes 70b_gate_up 70b_down --bits 4 --rounds 3 \
    --order interleaved "$@" \
    >> "$OUT/conditions.txt" 2>&1
}
run alone --M 1 --no-cublas
run with_cublas --M 1
run with_cublas_m128 --M 1 128
run alone_again --M 1 --no-cublas
kill "$smi"
