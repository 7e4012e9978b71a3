# 2026-12-04-c call 3: bt192 (a 192-token prefill tile, wgmma n192; slice cost priced halfway between
# BT 128 and 256) against main (5b1b963) on the M where the planner now takes it (192, 384, 576, 768,
# 1152, 1536) and two where it does not (512, 1024), int4 and int8, eight layers, 4 rounds; bt192's
# prefill / dispatch / crossover GPU tests and its sanitizer cases.
source scripts/device_call.sh
dc_begin
ROUNDS=4 dc_ab_prefill "main bt192" \
  "--model llama-3-70b,llama-3-8b --m 192,384,512,576,768,1024,1152,1536 --paths prefill" \
  "--bits 8 --model llama-3-70b,llama-3-8b --m 192,384,576,768,1536 --paths prefill" 300
dc_use bt192 && dc_run bt192_tests 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_prefill_gpu.py tests/test_ops_gpu.py tests/test_crossovers_gpu.py tests/test_sanitize_gpu.py -rf
SAN_SECONDS=50 dc_sanitize -k prefill
