# 2026-12-04-c call 5: on the final build (30b5057): the act-order sweep (does the 192-token tile move
# act-order's prefill / dense crossover?) and the README's main command, `swordfish bench`.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run dispatch_act 90 python benchmarks/bench_dispatch.py --bits 4 --act-order --m 256,512,1024,2048,3072,4096,8192 --paths auto,prefill,dense,cublas --rounds 3 --out $R/dispatch_act
(mkdir -p $R/bench && cd $R/bench && timeout 80 python -m swordfish_backend bench --commit 30b5057 > bench.txt 2>&1); dc_pack bench
