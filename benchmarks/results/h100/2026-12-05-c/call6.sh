# 2026-12-05-c call 6 (H100): after the review commit c88f2fc moved both benches' per-point timing into
# swordfish_backend.bench.time_point, run each end to end on the GPU once more, with the bench tests.
source scripts/device_call.sh; dc_begin; dc_use main
dc_run bench 90 python -m swordfish_backend bench -q --json $R/swordfish-bench.json --png ''
dc_run dispatch 120 python benchmarks/bench_dispatch.py --quick --shapes 8b_qkv,70b_o --out $R/dispatch
dc_run tests 90 python -m pytest -q -p no:cacheprovider tests/test_cli.py tests/test_bench_dispatch.py tests/test_bench_decode.py
cat $R/log.txt
