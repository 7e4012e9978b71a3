#!/bin/bash
# 2026-12-03-g call 3. main = call 2's int8 prefill epilogue change + swap_kernel's 16-byte atomic runs
# from M = 5 (kSwapRunsMinM); base = 3199b82. Decode GPU tests and the decode sanitizer cases on main;
# full ncu profiles of the int4 and int8 prefill kernels on 70B o at M = 2048 (BT 256: where int8
# costs ~10% more per k64 slice than int4); then an interleaved A/B: decode at M = 1-8 and int8 prefill.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_decode 200 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_sanitize_gpu.py tests/test_ops_gpu.py -rf
SAN_SECONDS=70 dc_sanitize -k "decode"
for b in 4 8; do
  n=ncu_prefill_70bo_m2048_int$b
  timeout 70 ncu --clock-control none --set full --import-source no -k regex:gemm_kernel -c 1 -f -o /tmp/$n \
    python -m swordfish_backend bench --shapes '8192,8192' --m 2048 --paths prefill --bits $b --json '' -q > $R/$n.log 2>&1
  ncu -i /tmp/$n.ncu-rep > $R/$n.txt 2>&1
  ncu -i /tmp/$n.ncu-rep --page source --csv --print-source sass > $R/${n}_sass.csv 2>&1
  python benchmarks/ncu_stalls.py $R/${n}_sass.csv --top 30 > $R/${n}_stalls.txt 2>&1
  rm -f $R/${n}_sass.csv
  dc_pack $n
done
VARIANTS="base main" ROUNDS=4 TESTS="" PREFILL_ARGS="" DECODE_ARGS="--bits 4 8 --M 1 2 4 5 6 7 8 --no-cublas" \
  PREFILL8_ARGS="--model llama-3-70b,llama-3-8b --m 128,256,512,1024,2048 --paths prefill --bits 8" \
  timeout 300 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
mkdir -p $R/ab && cp -r /tmp/ab/* $R/ab/ 2>/dev/null; dc_pack ab
