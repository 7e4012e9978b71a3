# 2026-12-04 call 2: the stage's Transform as one branch-free block (hoist: the zero-point branch
# taken once per stage, not per slice) against 6953716 (main): prefill GPU tests on hoist, then an
# interleaved A/B of the prefill path, int4 and int8, M = 48-1024.
source scripts/device_call.sh
dc_begin
dc_use hoist
dc_run tests_prefill 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py -rf
VARIANTS="main hoist" ROUNDS=2 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m 48,64,128,256,512,1024 --paths prefill" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 64,128,256,512,1024 --paths prefill --bits 8" \
  timeout 330 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_*.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab && cp -r /tmp/ab/prefill /tmp/ab/prefill8 $R/ab/ 2>/dev/null
dc_pack ab
