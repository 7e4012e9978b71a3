# 2026-12-03-i call 3: the tree's kernels (41e832e; this session's commits add only documents and an
# experiment patch) measured whole: the dispatcher sweep (int4 + int8, every path, 5 interleaved
# rounds), the act-order sweep, `swordfish bench`, the decode bench with cuBLAS, the sanitizers over
# every kernel family's small cases.
source scripts/device_call.sh
dc_begin
STAGES="prebuilt probe" OUT=$R bash scripts/gpu_check.sh > /dev/null 2>&1; dc_pack install
M_SWEEP="1,16,24,32,40,48,56,64,72,80,96,128,192,256,384,512,768,1024,2048,4096,8192"
dc_run dispatch 170 python benchmarks/bench_dispatch.py --bits 4 8 --m "$M_SWEEP" --rounds 5 --out $R/dispatch
dc_run dispatch_act 120 python benchmarks/bench_dispatch.py --bits 4 --act-order --m 256,512,1024,2048,3072,4096,8192 --paths auto,prefill,dense,cublas --rounds 3 --out $R/dispatch_act
(mkdir -p $R/bench && cd $R/bench && timeout 60 python -m swordfish_backend bench --commit 41e832e > bench.txt 2>&1); dc_pack bench
dc_run decode 100 python benchmarks/bench_decode.py --bits 4 8 --M 1 16 32 64 128 --out $R/decode.json
SAN_SECONDS=90 dc_sanitize
