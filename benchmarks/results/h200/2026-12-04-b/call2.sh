# 2026-12-04-b call 2: the tree's build (5d1fe80, uniform wgmma descriptors) measured whole: the GPU
# suite, the dispatcher sweep (int4 + int8, every path, 5 interleaved rounds), the act-order sweep,
# `swordfish bench`, the decode bench with cuBLAS; then planb (the BT 64 slice constants refitted:
# 292 -> 277 ns int4, 365 -> 351 int8) against it on the plans that change (8B qkv M = 17-192, 70B qkv
# M = 160-192), prefill path, 3 rounds.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests 220 python -m pytest -q -n 16 -p no:cacheprovider tests -rf
M_SWEEP="1,16,24,32,40,48,56,64,72,80,96,128,192,256,384,512,768,1024,2048,4096,8192"
dc_run dispatch 150 python benchmarks/bench_dispatch.py --bits 4 8 --m "$M_SWEEP" --rounds 5 --out $R/dispatch
dc_run dispatch_act 60 python benchmarks/bench_dispatch.py --bits 4 --act-order --m 256,512,1024,2048,3072,4096,8192 --paths auto,prefill,dense,cublas --rounds 3 --out $R/dispatch_act
(mkdir -p $R/bench && cd $R/bench && timeout 60 python -m swordfish_backend bench --commit 5d1fe80 > bench.txt 2>&1); dc_pack bench
dc_run decode 80 python benchmarks/bench_decode.py --bits 4 8 --M 1 16 32 64 128 --out $R/decode.json
VARIANTS="main planb" ROUNDS=3 TESTS="" DECODE_ARGS="" \
  PREFILL_ARGS="--shapes 4096,6144;8192,10240 --m 17,24,33,40,48,56,64,96,160,192 --paths prefill" \
  PREFILL8_ARGS="--shapes 4096,6144 --m 160,192 --paths prefill --bits 8" \
  timeout 150 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_*.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab && cp -r /tmp/ab/prefill /tmp/ab/prefill8 $R/ab/ 2>/dev/null
dc_pack ab
