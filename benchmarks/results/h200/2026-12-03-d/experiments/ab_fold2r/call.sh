#!/bin/bash
# 2026-12-03-d call 3: A/B of fold2r (FOLD at MT = 2 on layers of <= 2^19 weights per SM) against main (44541dd);
# with fold2r: decode + dispatch GPU tests (the large-layer unfolded MT = 2 test included), decode memcheck;
# a full ncu profile of gemm_kernel MT = 1 at M = 16 on 70B gate_up (stall reasons)
set -u
tar xJf prebuilt/variants.tar.xz -C prebuilt && python3 -m pip install -q --no-index --no-deps .whl/*.whl
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/res; rm -rf $R; mkdir -p $R; t0=$(date +%s)
pack() { echo "$1 $(( $(date +%s) - t0 )) s" | tee -a $R/log.txt; tar czf $OUT/res.tgz -C $R .; }
VARIANTS="main fold2r" ROUNDS=3 TESTS="" PREFILL_ARGS="" DECODE_ARGS="--bits 4 8 --M 16 17 24 32 --no-cublas --settle 0.2" \
  timeout 150 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_decode.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab; cp -r /tmp/ab/decode $R/ab/ 2>/dev/null; pack ab
cp prebuilt/fold2r/_C.so swordfish_backend/_C.so; cp prebuilt/fold2r/_C_build.json swordfish_backend/_C_build.json
timeout 150 python -m pytest -q -n 16 -p no:cacheprovider tests/test_decode_gpu.py tests/test_dispatch.py tests/test_decode_emulation.py -rf > $R/tests.txt 2>&1
pack "tests: $(tail -n 1 $R/tests.txt)"
timeout 50 compute-sanitizer --tool memcheck python -m pytest -q -p no:cacheprovider tests/test_sanitize_gpu.py -m sanitize -k decode > $R/san_memcheck.txt 2>&1
pack "san memcheck rc=$?: $(grep -E 'ERROR SUMMARY|passed|failed' $R/san_memcheck.txt | tr '\n' ' ')"
timeout 90 ncu --clock-control none --set full --import-source no -k regex:gemm_kernel -c 1 -f -o /tmp/m16 \
  python benchmarks/bench_decode.py --shapes 70b_gate_up --M 16 --bits 4 --no-cublas --rounds 1 > $R/ncu_m16.log 2>&1
ncu -i /tmp/m16.ncu-rep > $R/ncu_decode_m16.txt 2>&1
ncu -i /tmp/m16.ncu-rep --page source --csv --print-source sass > /tmp/m16_sass.csv 2>&1
python benchmarks/ncu_stalls.py /tmp/m16_sass.csv --top 30 > $R/ncu_decode_m16_stalls.txt 2>&1
pack ncu
