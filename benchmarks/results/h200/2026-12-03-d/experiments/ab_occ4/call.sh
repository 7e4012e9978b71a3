#!/bin/bash
# 2026-12-03-d call 4: A/B of occ4 (gemm_kernel MT = 1, M = 9-16: 4 CTAs per SM, 128 registers, rings 4 / 5)
# against fold2r (9f322b3); decode GPU tests on occ4
set -u
tar xJf prebuilt/variants.tar.xz -C prebuilt && python3 -m pip install -q --no-index --no-deps .whl/*.whl
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/res; rm -rf $R; mkdir -p $R; t0=$(date +%s)
pack() { echo "$1 $(( $(date +%s) - t0 )) s" | tee -a $R/log.txt; tar czf $OUT/res.tgz -C $R .; }
VARIANTS="fold2r occ4" ROUNDS=3 TESTS="" PREFILL_ARGS="" DECODE_ARGS="--bits 4 8 --M 9 12 16 --no-cublas --settle 0.2" \
  timeout 150 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_decode.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab; cp -r /tmp/ab/decode $R/ab/ 2>/dev/null; pack ab
cp prebuilt/occ4/_C.so swordfish_backend/_C.so; cp prebuilt/occ4/_C_build.json swordfish_backend/_C_build.json
timeout 120 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py -rf > $R/tests.txt 2>&1
pack "tests: $(tail -n 1 $R/tests.txt)"
