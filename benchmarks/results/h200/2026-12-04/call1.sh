# 2026-12-04 call 1: the BT 64 prefill tile with two consumer warpgroups per n64 block (kw2, the
# working tree) against 6953716 (main): prefill GPU tests and sanitizers on kw2, then an interleaved
# A/B of the prefill path (int4 and int8) at the M where the planner picks BT 64 and just above.
source scripts/device_call.sh
dc_begin
dc_use kw2
dc_run tests_prefill 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_dispatch.py -rf
SAN_SECONDS=80 dc_sanitize -k prefill
VARIANTS="main kw2" ROUNDS=2 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m 16,33,48,64,96,128 --paths prefill" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 16,33,48,64,96,128 --paths prefill --bits 8" \
  timeout 300 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_*.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab && cp -r /tmp/ab/prefill /tmp/ab/prefill8 $R/ab/ 2>/dev/null
dc_pack ab
