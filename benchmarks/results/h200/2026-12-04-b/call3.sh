# 2026-12-04-b call 3: tail (the last m tile's x box holds only its rows, a second tensor map) against
# 5d1fe80 (main): prefill GPU tests and sanitizers on tail, then an interleaved A/B of the prefill path
# at M that leave a partial last m tile (and whole-tile M as controls), int4 and int8.
source scripts/device_call.sh
dc_begin
dc_use tail
dc_run tests_prefill 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_dispatch.py -rf
VARIANTS="main tail" ROUNDS=3 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m 100,128,160,192,300,600,700,1100,2100 --paths prefill" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 100,160,300,600,1100 --paths prefill --bits 8" \
  timeout 330 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_*.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab && cp -r /tmp/ab/prefill /tmp/ab/prefill8 $R/ab/ 2>/dev/null
dc_pack ab
dc_use tail
SAN_SECONDS=60 dc_sanitize -k prefill
