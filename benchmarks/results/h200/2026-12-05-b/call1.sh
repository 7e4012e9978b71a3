# 2026-12-05-b call 1: the whole tree at 73d7dd4 (sm_90a build from the CPU machine, carried in
# prebuilt/variants.tar.xz). Every path (auto, decode, prefill, dense, cuBLAS) for int4 and int8 g128
# bf16 over the eight Llama-3 shapes up to M = 12288, 5 interleaved rounds; then the decode bench
# (issue #3's table); then compute-sanitizer over the `sanitize` tests (every kernel family).
source scripts/device_call.sh; dc_begin; dc_use main
M_SWEEP="1,16,24,32,40,48,56,64,72,80,96,128,192,256,384,512,768,1024,2048,4096,6144,8192,12288"
dc_run dispatch 200 python benchmarks/bench_dispatch.py --bits 4 8 --m "$M_SWEEP" --rounds 5 --out $R/dispatch
dc_run decode 100 python benchmarks/bench_decode.py --bits 4 8 --M 1 8 9 16 32 64 128 --out $R/decode.json
SAN_SECONDS=60 dc_sanitize
cat $R/log.txt
