# 2026-12-04-b call 1: wgmma B descriptors built from a warp-uniform stage index (udesc,
# benchmarks/experiments/prefill_uniform_desc.patch) against 6953716 (main): prefill GPU tests and
# sanitizers on udesc, then an interleaved A/B of the prefill path, int4 and int8, M = 33-2048.
source scripts/device_call.sh
dc_begin
dc_use udesc
dc_run tests_prefill 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py -rf
VARIANTS="main udesc" ROUNDS=3 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m 33,48,64,96,128,256,512,1024,2048 --paths prefill" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 33,48,64,96,128,256,512,1024,2048 --paths prefill --bits 8" \
  timeout 300 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_*.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab && cp -r /tmp/ab/prefill /tmp/ab/prefill8 $R/ab/ 2>/dev/null
dc_pack ab
dc_use udesc
SAN_SECONDS=60 dc_sanitize -k prefill
