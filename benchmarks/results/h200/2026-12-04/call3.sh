# 2026-12-04 call 3: BT 64 prefill stages issue each slice's MMAs as their own commit group (slc), the zero-point branch
# taken once per item against 6953716 (main): prefill GPU tests on slc, then an
# interleaved A/B of the prefill path, int4 and int8, M = 16-96.
source scripts/device_call.sh
dc_begin
dc_use slc
dc_run tests_prefill 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py -rf
VARIANTS="main slc" ROUNDS=3 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m 16,33,48,64,96 --paths prefill" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 16,33,48,64,96 --paths prefill --bits 8" \
  timeout 330 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_*.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab && cp -r /tmp/ab/prefill /tmp/ab/prefill8 $R/ab/ 2>/dev/null
dc_pack ab
