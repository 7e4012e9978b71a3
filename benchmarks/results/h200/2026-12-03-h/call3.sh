# 2026-12-03-h call 3. p8r = the planner's int8 BT 128 slice constant refitted (505 -> 450 ns: int8's
# BT 128 tile has k128 stages since 2026-12-03-g; held-others fit on call 2's base timings gave 446);
# main = 6937078 (kernels of de583ef). Prefill GPU tests on p8r, then int8 A/B with cuBLAS in the run.
source scripts/device_call.sh
dc_begin
VARIANTS="main p8r" ROUNDS=3 TESTS="tests/test_prefill_gpu.py tests/test_dispatch.py" DECODE_ARGS="" PREFILL_ARGS="" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 96,128,192,256,384,512,768,1024,1536 --paths prefill,cublas --bits 8" \
  timeout 420 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
mkdir -p $R/ab && cp -r /tmp/ab/* $R/ab/ 2>/dev/null; dc_pack ab
