# 2026-12-05 call 2 (late in the session, little device time left): only what 75ce8fb left to run,
# the int8 dense start at 8192 on the small layers: the crossover tests at every boundary of the
# table, and the int8 sweep around it that heuristics_sm90.hpp names.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run dispatch8 120 python benchmarks/bench_dispatch.py --bits 8 --m 4096,6144,8192,12288 --paths auto,prefill,dense,cublas --rounds 5 --out $R/dispatch8
dc_run crossovers 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_crossovers_gpu.py tests/test_dispatch.py -rf
