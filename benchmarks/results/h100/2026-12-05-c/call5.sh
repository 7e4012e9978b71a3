# 2026-12-05-c call 5 (meant for the H200; three H200 starts were refused, it ran on an H100): swordfish bench with
# the interleaved-round timing (a8ebbef): does the dispatcher's M = 1 column read as the same
# kernel forced; then the whole self-check with the ensure_dynamic_smem fix (69f99b1);
# then bench_dispatch --quick, which now takes its timing primitives from the package.
source scripts/device_call.sh; dc_begin; dc_use main
dc_run bench 120 python -m swordfish_backend bench -q --json $R/swordfish-bench.json --png $R/swordfish-bench.png
dc_run check 60 python -m swordfish_backend check
dc_run dispatch 150 python benchmarks/bench_dispatch.py --quick --out $R/dispatch
cat $R/log.txt
