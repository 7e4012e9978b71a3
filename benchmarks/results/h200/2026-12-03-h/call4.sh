# 2026-12-03-h call 4. main = the prefill path's act-order gather as gather_kernel (a row of x staged in
# shared memory, 16-byte runs out; decode's prep kernel beyond 49152 columns) and prep_kernel's gather
# guarded against perm entries outside [0, K); base = 6937078 (kernels of de583ef).
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_main 220 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_decode_gpu.py tests/test_ops_gpu.py tests/test_sanitize_gpu.py tests/test_dispatch.py -rf
SAN_SECONDS=80 dc_sanitize -k "prefill or perm"
dc_run noact 120 python -m swordfish_backend bench --model llama-3-70b,llama-3-8b --m 64,256,512,1024,2048 --paths prefill --json $R/noact.json --png '' -q
VARIANTS="base main" ROUNDS=3 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m 64,256,512,1024,2048 --paths prefill --act-order" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 1,16,48 --paths decode --act-order" \
  timeout 360 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
mkdir -p $R/ab && cp -r /tmp/ab/* $R/ab/ 2>/dev/null; dc_pack ab
