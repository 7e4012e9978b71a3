# 2026-12-04-d call 1: prefill_split_first (sf: split-K tiles summed inside the sm90 prefill GEMM by
# the CTAs with an item fewer; split items first) against main (a1dfa1a), 4 rounds, eight layers,
# int4 and int8 at the M where the plans split; sf's prefill / ops / sanitize GPU tests (the patch's
# counter tests among them) and compute-sanitizer on the prefill cases.
source scripts/device_call.sh
dc_begin
dc_use sf && dc_run sf_tests 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_ops_gpu.py tests/test_sanitize_gpu.py -rf
SAN_SECONDS=100 dc_sanitize -k prefill
ROUNDS=4 dc_ab_prefill "main sf" \
  "--model llama-3-70b,llama-3-8b --m 128,256,384,512,576,768,1024,1152,1536 --paths prefill" \
  "--bits 8 --model llama-3-70b,llama-3-8b --m 256,384,576,768,1024,1152,1536 --paths prefill" 250
