#!/bin/bash
# 2026-12-03-c call 4: decode bench in the by-m order (and interleaved, for comparison) of the efa415e
# build; A/B of gemm_kernel without its atomic flush (gnf, timing only) and kMinUnitsPerCta 8 (kmin8)
set -u
tar xJf prebuilt/variants.tar.xz -C prebuilt && python3 -m pip install -q --no-index --no-deps .whl/*.whl
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/res; rm -rf $R; mkdir -p $R; t0=$(date +%s)
pack() { echo "$1 $(( $(date +%s) - t0 )) s" | tee -a $R/log.txt; tar czf $OUT/res.tgz -C $R .; }
STAGES=prebuilt OUT=$R bash scripts/gpu_check.sh > /dev/null 2>&1; pack install
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv -lms 200 > $R/smi.csv 2>&1 &
smi=$!
timeout 130 python benchmarks/bench_decode.py --bits 4 8 --M 1 16 32 64 128 --out $R/decode.json > $R/decode.txt 2>&1; pack decode
timeout 80 python benchmarks/bench_decode.py --bits 4 --M 1 16 32 64 128 --order interleaved --out $R/decode_interleaved.json \
  > $R/decode_interleaved.txt 2>&1; pack interleaved
kill $smi
VARIANTS="main gnf kmin8" ROUNDS=3 TESTS="" PREFILL_ARGS="" DECODE_ARGS="--bits 4 8 --M 1 9 16 --no-cublas" \
  timeout 150 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_decode.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab; cp -r /tmp/ab/decode $R/ab/ 2>/dev/null; pack ab
cp prebuilt/kmin8/_C.so swordfish_backend/_C.so; cp prebuilt/kmin8/_C_build.json swordfish_backend/_C_build.json
timeout 120 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_dispatch.py -rf > $R/tests_kmin8.txt 2>&1
pack "tests kmin8: $(tail -n 1 $R/tests_kmin8.txt)"
