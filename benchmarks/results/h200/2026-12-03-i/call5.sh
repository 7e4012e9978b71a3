# 2026-12-03-i call 5: the build of e6e1e84 (the dispatcher's unbalanced-plan rule): the dispatch,
# ops and prefill GPU tests, and the dispatcher's choice around the new boundary on the 70B layers
# (auto against decode and prefill forced, 3 interleaved rounds).
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_dispatch.py tests/test_ops_gpu.py tests/test_prefill_gpu.py tests/test_decode_gpu.py -rf
dc_run boundary 90 python benchmarks/bench_dispatch.py --bits 4 8 --shapes 70b_qkv,70b_o,70b_down,70b_gate_up --m 32,33,40,48,49,56 --paths auto,decode,prefill --rounds 3 --no-dequant --out $R/boundary
