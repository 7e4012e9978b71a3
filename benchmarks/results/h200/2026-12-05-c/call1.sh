# 2026-12-05-c call 1 (H200): README's first command's main job with the interleaved-round timing (a8ebbef),
# to see on the H200, where it was first noticed, whether the dispatcher's M = 1 column now reads as the same
# kernel forced; then the whole self-check with the ensure_dynamic_smem fix (69f99b1), on the H200 this time;
# then bench_dispatch --quick, which now takes its timing primitives from the package.
source scripts/device_call.sh; dc_begin; dc_use main
dc_run bench 120 python -m swordfish_backend bench -q --json $R/swordfish-bench.json --png $R/swordfish-bench.png
dc_run check 60 python -m swordfish_backend check
dc_run dispatch 150 python benchmarks/bench_dispatch.py --quick --out $R/dispatch
cat $R/log.txt
