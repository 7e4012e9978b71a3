#!/bin/bash
# 2026-12-03-c call 5: A/B of gemm_kernel's 16-byte atomic runs (v8red, 663b98b) against main (efa415e build),
# then with v8red installed: decode / dispatch / prefill GPU tests and the decode sanitizer cases
set -u
tar xJf prebuilt/variants.tar.xz -C prebuilt && python3 -m pip install -q --no-index --no-deps .whl/*.whl
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/res; rm -rf $R; mkdir -p $R; t0=$(date +%s)
pack() { echo "$1 $(( $(date +%s) - t0 )) s" | tee -a $R/log.txt; tar czf $OUT/res.tgz -C $R .; }
VARIANTS="main v8red" ROUNDS=3 TESTS="" PREFILL_ARGS="" DECODE_ARGS="--bits 4 8 --M 1 9 16 24 32 48 64 --no-cublas" \
  timeout 120 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_decode.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab; cp -r /tmp/ab/decode $R/ab/ 2>/dev/null; pack ab
cp prebuilt/v8red/_C.so swordfish_backend/_C.so; cp prebuilt/v8red/_C_build.json swordfish_backend/_C_build.json
timeout 110 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_dispatch.py tests/test_prefill_gpu.py -rf \
  > $R/tests.txt 2>&1; pack "tests: $(tail -n 1 $R/tests.txt)"
for tool in memcheck racecheck; do
  timeout 45 compute-sanitizer --tool $tool python -m pytest -q -p no:cacheprovider tests/test_decode_gpu.py -m sanitize > $R/san_$tool.txt 2>&1
  pack "san $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' $R/san_$tool.txt | tr '\n' ' ')"
done
