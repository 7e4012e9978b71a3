# 2026-12-03-i call 2: split-K tiles summed inside the GEMM by the last split to arrive (per-stream
# counters, no reduce kernel). main = that build; base = 41e832e. Tests, sanitizers, A/B int4 + int8
# on the eight Llama-3 layers at M = 33-1024 (same plans: the cost model is unchanged), timeline.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_main 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_ops_gpu.py tests/test_dispatch.py tests/test_sanitize_gpu.py -rf
SAN_SECONDS=70 dc_sanitize -k "prefill"
VARIANTS="base main" ROUNDS=2 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m 33,48,64,96,128,192,256,384,512,768,1024 --paths prefill" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 33,48,64,96,128,192,256,384,512,768,1024 --paths prefill --bits 8" \
  timeout 300 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
mkdir -p $R/ab && cp -r /tmp/ab/* $R/ab/ 2>/dev/null; dc_pack ab
dc_use main
dc_run timeline_main 60 python benchmarks/experiments/decode_timeline.py --path prefill --shapes 8b_qkv 8b_o 8b_down 70b_qkv 70b_o --M 64 128 256 512 --no-cublas --out $R/timeline_main.json
