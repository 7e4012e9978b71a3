# 2026-12-04-c call 2: tailz (prefill_x_tail_map + prefill_x_tail_zero) against main where every m
# tile is full (the sweep's M) and at two ragged M, int4 and int8, eight layers, 4 rounds.
source scripts/device_call.sh
dc_begin
ROUNDS=4 dc_ab_prefill "main tailz" \
  "--model llama-3-70b,llama-3-8b --m 128,256,512,1000,1024,2048,4096 --paths prefill" \
  "--bits 8 --model llama-3-70b,llama-3-8b --m 128,512,1024,2048,4096 --paths prefill" 420
