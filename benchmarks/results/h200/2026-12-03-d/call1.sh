#!/bin/bash
# 2026-12-03-d call 1 (build 44541dd): decode bench (by-m), the dispatcher sweep at int4 / int8 with the
# crossover M values, swordfish bench, and ncu of prefill vs cuBLAS on 8B qkv M = 512 (the L2 question)
set -u
python3 -m pip install -q --no-index --no-deps .whl/*.whl
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
R=/tmp/res; rm -rf $R; mkdir -p $R; t0=$(date +%s)
pack() { echo "$1 $(( $(date +%s) - t0 )) s" | tee -a $R/log.txt; tar czf $OUT/res.tgz -C $R .; }
STAGES="prebuilt probe" OUT=$R bash scripts/gpu_check.sh > /dev/null 2>&1; pack install
M_SWEEP="1,16,24,32,40,48,56,64,72,80,96,128,192,256,384,512,768,1024,2048,4096,8192"
timeout 150 python benchmarks/bench_dispatch.py --bits 4 8 --m "$M_SWEEP" --rounds 5 --out $R/dispatch > $R/dispatch.txt 2>&1; pack dispatch
timeout 130 python benchmarks/bench_decode.py --bits 4 8 --M 1 16 32 64 128 --out $R/decode.json > $R/decode.txt 2>&1; pack decode
(mkdir -p $R/bench && cd $R/bench && timeout 60 python -m swordfish_backend bench --commit 44541dd > bench.txt 2>&1); pack bench
MET=lts__t_bytes.sum.per_second,lts__t_sectors.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,l1tex__t_bytes.sum,lts__t_sector_hit_rate.pct
for m in 512 1024; do
timeout 60 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --metrics $MET -k regex:gemm_kernel -c 1 \
  python -m swordfish_backend bench --shapes '4096,6144' --m $m --paths prefill --json '' -q > $R/ncu_prefill_8bqkv_m$m.txt 2>&1
timeout 60 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --metrics $MET -k regex:'nvjet|xmma|cutlass|gemm' -c 1 \
  python -m swordfish_backend bench --shapes '4096,6144' --m $m --paths cublas --json '' -q > $R/ncu_cublas_8bqkv_m$m.txt 2>&1
pack ncu$m
done
