#!/bin/bash
# 2026-12-03-d call 2: A/B of FOLD at MT = 2 (fold2: M = 17-32 on the fp32 per-group scale fold) against main
# (44541dd), then with fold2 installed: the whole GPU suite and the decode sanitizer cases
set -u
tar xJf prebuilt/variants.tar.xz -C prebuilt && python3 -m pip install -q --no-index --no-deps .whl/*.whl
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/res; rm -rf $R; mkdir -p $R; t0=$(date +%s)
pack() { echo "$1 $(( $(date +%s) - t0 )) s" | tee -a $R/log.txt; tar czf $OUT/res.tgz -C $R .; }
VARIANTS="main fold2" ROUNDS=3 TESTS="" PREFILL_ARGS="" DECODE_ARGS="--bits 4 8 --M 1 16 17 24 32 --no-cublas --settle 0.2" \
  timeout 200 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_decode.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab; cp -r /tmp/ab/decode $R/ab/ 2>/dev/null; pack ab
cp prebuilt/fold2/_C.so swordfish_backend/_C.so; cp prebuilt/fold2/_C_build.json swordfish_backend/_C_build.json
timeout 170 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf > $R/tests.txt 2>&1
pack "tests: $(tail -n 1 $R/tests.txt)"
for tool in memcheck racecheck synccheck; do
  timeout 50 compute-sanitizer --tool $tool python -m pytest -q -p no:cacheprovider tests/test_sanitize_gpu.py -m sanitize -k decode > $R/san_$tool.txt 2>&1
  pack "san $tool rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' $R/san_$tool.txt | tr '\n' ' ')"
done
