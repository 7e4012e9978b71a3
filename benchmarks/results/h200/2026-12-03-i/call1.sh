# 2026-12-03-i call 1: the whole GPU suite on 41e832e (the previous session's final build, not yet run whole),
# then where a split prefill plan's fixed cost goes (decode_timeline.py --path prefill, first run).
source scripts/device_call.sh
dc_begin
dc_use main
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/smi.txt 2>&1
dc_run tests 260 python -m pytest -q -n 16 -p no:cacheprovider tests -rf
dc_run timeline_prefill 150 python benchmarks/experiments/decode_timeline.py --path prefill --shapes 8b_qkv 8b_o 8b_down 70b_qkv 70b_o --M 64 128 256 512 --out $R/timeline_prefill.json
dc_run timeline_decode 60 python benchmarks/experiments/decode_timeline.py --shapes 8b_qkv 8b_o 70b_qkv 70b_o --M 1 --out $R/timeline_decode.json
