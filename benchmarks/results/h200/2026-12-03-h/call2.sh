# 2026-12-03-h call 2. main = prefill split tiles added in L2 by TMA reduce (default mode; init_kernel
# before the GEMM) with guessed add-mode plan constants; same = that kernel with the planner pricing add
# like the partials reduce (so its plans are base's: the mechanism alone); base = de583ef.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_main 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_ops_gpu.py tests/test_dispatch.py tests/test_sanitize_gpu.py -rf
SAN_SECONDS=70 dc_sanitize -k "prefill"
VARIANTS="base same main" ROUNDS=2 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m 33,64,96,128,192,256,384,512,768,1024 --paths prefill" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 33,64,96,128,192,256,384,512,768,1024 --paths prefill --bits 8" \
  timeout 330 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
mkdir -p $R/ab && cp -r /tmp/ab/* $R/ab/ 2>/dev/null; dc_pack ab
