#!/usr/bin/env bash
# A/B of extension builds in ONE device call (carry .whl and prebuilt/): "main" is
# prebuilt/_C.so, any other variant V is prebuilt/V/_C.so (build each on the CPU machine, see
# CONTRIBUTING). Runs TESTS against every variant but main, then ROUNDS interleaved rounds of
# the prefill bench and the decode bench (variant order alternates each round), and compares
# them with benchmarks/ab_compare.py (minimum over rounds, ratio to main, spread).
#   VARIANTS="main k128" ROUNDS=2 bash scripts/ab_variants.sh
# Knobs (environment): TESTS (pytest paths; '' skips); PREFILL_ARGS, PREFILL8_ARGS (`swordfish
# bench` arguments, the second for a --bits 8 sweep, off by default) and DECODE_ARGS
# (benchmarks/bench_decode.py arguments): '' skips that bench. Everything lands in $OUT/ab.tgz.
set -uo pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
R=/tmp/ab; rm -rf "$R"; mkdir -p "$R"
read -r -a V <<< "${VARIANTS:-main}"
ROUNDS="${ROUNDS:-2}"
TESTS="${TESTS-tests/test_prefill_gpu.py tests/test_decode_gpu.py}"
PREFILL_ARGS="${PREFILL_ARGS---model llama-3-70b,llama-3-8b --m 1,64,128,256,512,1024 --paths prefill}"
PREFILL8_ARGS="${PREFILL8_ARGS-}"
DECODE_ARGS="${DECODE_ARGS---bits 4 8 --M 1 16 32 48 --no-cublas}"
declare -A ARGS=([prefill]="$PREFILL_ARGS" [prefill8]="$PREFILL8_ARGS" [decode]="$DECODE_ARGS")
BENCHES=(); for b in prefill prefill8 decode; do [ -n "${ARGS[$b]}" ] && BENCHES+=("$b") && mkdir -p "$R/$b"; done
# shellcheck source=scripts/device_call.sh
source "$(dirname "${BASH_SOURCE[0]}")/device_call.sh"
dc_unpack  # builds carried packed (device_call.sh: the tree and the carry must stay under 64 MiB)
use() {  # dc_use, logging a variant that has no build
  dc_use "$1" && return 0
  echo "ab_variants: no build for variant $1 (prebuilt/_C.so for main, else prebuilt/$1/_C.so)" | tee -a "$R/log.txt"
  return 1
}
for v in "${V[@]}"; do
  if [ "$v" = main ] || [ -z "$TESTS" ]; then continue; fi
  use "$v" || continue
  # shellcheck disable=SC2086
  timeout 240 python -m pytest -q -n 16 -p no:cacheprovider $TESTS -rf > "$R/tests_$v.txt" 2>&1
  echo "tests $v: $(tail -n 1 "$R/tests_$v.txt")" | tee -a "$R/log.txt"
done
for r in $(seq 1 "$ROUNDS"); do
  order=("${V[@]}")
  if [ $((r % 2)) -eq 0 ]; then  # reverse the order every other round
    order=(); for ((i = ${#V[@]} - 1; i >= 0; i--)); do order+=("${V[i]}"); done
  fi
  for v in "${order[@]}"; do
    use "$v" || continue
    t0=$(date +%s)
    for b in "${BENCHES[@]}"; do
      if [ "$b" = decode ]; then
        # shellcheck disable=SC2086
        timeout 150 python benchmarks/bench_decode.py ${ARGS[$b]} --rounds 1 --out "$R/$b/${v}_$r.json" \
          > "$R/$b/${v}_$r.txt" 2>&1
      else
        # shellcheck disable=SC2086
        timeout 150 python -m swordfish_backend bench ${ARGS[$b]} -q --png '' --json "$R/$b/${v}_$r.json" \
          > "$R/$b/${v}_$r.txt" 2>&1
      fi
    done
    echo "round $r $v: $(( $(date +%s) - t0 )) s" | tee -a "$R/log.txt"
  done
done
for b in "${BENCHES[@]}"; do
  compgen -G "$R/$b/*.json" > /dev/null && python benchmarks/ab_compare.py "$R/$b" --base "${V[0]}" > "$R/ab_$b.txt" 2>&1
done
tar czf "$OUT/ab.tgz" -C "$R" .
tail -n 1 "$R"/ab_*.txt 2>/dev/null
