# 2026-12-04-d call 4: where the swap kernel's time goes as M grows from 1 to 8 (70B gate_up: 1.20x
# the M = 1 time at M = 8, 2026-12-03-g). Timing-only builds (wrong results, not for use): x1 stages
# only token 0's activations (every M: the M = 1 staging), nf skips the atomic flush (one compare
# keeps the MMAs). main, x1, nf: 4 rounds, int4, eight layers, M = 1, 2, 4, 8 (+ 16, gemm_kernel,
# unchanged in both: a control).
source scripts/device_call.sh
dc_begin
ROUNDS=4 dc_ab "main x1 nf" "--bits 4 --M 1 2 4 8 16 --no-cublas" 300
