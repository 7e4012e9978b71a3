#!/usr/bin/env bash
# Everything for one dated results folder in ONE device call (carry .whl and
# prebuilt/): the carried prebuilt/_C.so, the error probe, the whole test
# suite, compute-sanitizer (memcheck, racecheck, synccheck), `swordfish bench`
# (default), the decode benchmark (and its deterministic mode, int4), the dispatcher sweep (int4 + int8, every
# path in interleaved rounds) and an act-order sweep, a full ncu profile of the
# dequant kernel (with its bank-conflict counters); `swordfish check` with CHECK=1,
# the decode kernel timeline (decode_timeline.py), ncu profiles of the decode kernels (M = 1
# sections, M = 16 full) with NCU_DECODE=1, a full profile of the M = 1 kernel on 70B o with
# NCU_DECODE_SMALL=1 and of the prefill kernel with NCU_PREFILL=1 (see profile() below). About 7 minutes.
# Everything lands in $OUT/results.tgz (one file: the device returns at most 8).
#   COMMIT=<sha> bash scripts/h200_results.sh
set -uo pipefail
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the prebuilt stage installs nothing
R=/tmp/results; rm -rf "$R"; mkdir -p "$R"
COMMIT="${COMMIT:-unknown}"
t() { local s=$1; shift; timeout "$s" "$@"; }
STAGES="prebuilt probe" OUT="$R" bash scripts/gpu_check.sh > /dev/null 2>&1
[ -f prebuilt/_C_h211.so ] && t 60 python scripts/probe_op_errors.py "$PWD/prebuilt/_C_h211.so" > "$R/probe_h211.txt" 2>&1
t 170 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf > "$R/tests.txt" 2>&1
STAGES=sanitize SAN_TIMEOUT=80 OUT="$R" bash scripts/gpu_check.sh > /dev/null 2>&1
(mkdir -p "$R/bench" && cd "$R/bench" && t 60 python -m swordfish_backend bench --commit "$COMMIT" > bench.txt 2>&1)
t 150 python benchmarks/bench_decode.py --bits 4 8 --M ${DECODE_M:-1 16 32 64 128} --out "$R/decode.json" > "$R/decode.txt" 2>&1
# The deterministic mode's cost (shared-memory / fp32-partial epilogues instead of atomics): int4, no cuBLAS.
t 60 python benchmarks/bench_decode.py --bits 4 --M 1 16 32 64 --deterministic --no-cublas \
  --out "$R/decode_deterministic.json" > "$R/decode_deterministic.txt" 2>&1
M_SWEEP="1,16,24,32,40,48,56,64,72,80,96,128,192,256,384,512,768,1024,2048,4096,8192"
t 120 python benchmarks/bench_dispatch.py --bits ${DISPATCH_BITS:-4 8} --m "$M_SWEEP" --rounds 5 --out "$R/dispatch" > "$R/dispatch.txt" 2>&1
t 40 python benchmarks/bench_dispatch.py --bits 4 --act-order --shapes 8b_o,70b_o,70b_gate_up --m 64,512,2048,4096,8192 \
  --rounds 3 --no-dequant --out "$R/dispatch_act" > "$R/dispatch_act.txt" 2>&1
[ -n "${CHECK:-}" ] && t 40 python -m swordfish_backend check > "$R/check.txt" 2>&1
# profile NAME KERNEL_REGEX SECONDS [NCU_OPTION ...] -- COMMAND ...: one full ncu profile (with
# per-instruction stall samples and source counters) of the first matching launch, kept as
# $R/NAME.ncu-rep plus its details page (NAME.txt), its SASS page (NAME_sass.csv) and
# benchmarks/ncu_stalls.py's reading of it (NAME_stalls.txt: stalls, mbarrier waits, and
# shared-memory wavefronts beyond the ideal per instruction). The aggregate bank-conflict counters
# also count accesses no instruction makes conflicting (the prefill kernel's aggregate reads
# 1.3-way on stores while every STS shows 0 excess): read the per-instruction list.
profile() {
  local name=$1 kernel=$2 secs=$3; shift 3
  local opts=()
  while [ "$1" != "--" ]; do opts+=("$1"); shift; done; shift
  t "$secs" ncu --clock-control none --set full --import-source no "${opts[@]}" -k "regex:$kernel" -c 1 -f \
    -o "$R/$name" "$@" > "$R/$name.log" 2>&1
  ncu -i "$R/$name.ncu-rep" > "$R/$name.txt" 2>&1
  ncu -i "$R/$name.ncu-rep" --page source --csv --print-source sass > "$R/${name}_sass.csv" 2>&1
  python benchmarks/ncu_stalls.py "$R/${name}_sass.csv" --top 25 > "$R/${name}_stalls.txt" 2>&1
}
# The dense dequant kernel, 70B o int4, with the aggregate bank-conflict and DRAM counters.
profile ncu_dequant dequant_kernel 60 --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
  -- python benchmarks/bench_dispatch.py --dequant-only --shapes 70b_o --bits 4 --out /tmp/n
if [ -n "${NCU_DECODE:-}" ]; then
  t 45 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    -k regex:swap_kernel -c 1 python benchmarks/bench_decode.py --shapes 70b_gate_up --M 1 --bits 4 --no-cublas \
    > "$R/ncu_decode_m1.txt" 2>&1
  # M = 16: the m16 gemm kernel.
  profile ncu_decode_m16 gemm_kernel 60 -- python benchmarks/bench_decode.py --shapes 70b_gate_up --M 16 --bits 4 --no-cublas
fi
# The kernel timeline of decode calls at M = 1 (benchmarks/experiments/decode_timeline.py): period
# per call, each kernel's duration, the gaps between kernels, cuBLAS alongside.
t 60 python benchmarks/experiments/decode_timeline.py --shapes 8b_qkv 8b_o 70b_o 70b_gate_up --M 1 16 \
  --out "$R/decode_timeline.json" > "$R/decode_timeline.txt" 2>&1
# NCU_DECODE_SMALL=1: a full profile (stall samples per instruction) of the M = 1 swap kernel on
# 70B o, the shape furthest from its weight-stream floor (timeline: the kernel itself, not the gaps).
if [ -n "${NCU_DECODE_SMALL:-}" ]; then
  profile ncu_decode_70b_o_m1 swap_kernel 60 -- python benchmarks/bench_decode.py --shapes 70b_o --M 1 --bits 4 \
    --no-cublas --rounds 1
fi
# NCU_PREFILL=1: the prefill kernel on 70B gate_up at M = 128 and M = 1024.
if [ -n "${NCU_PREFILL:-}" ]; then
  for m in 128 1024; do
    profile "ncu_prefill_m$m" gemm_kernel 90 -- python -m swordfish_backend bench --shapes '8192,57344' --m $m \
      --paths prefill --json '' -q
  done
fi
tar czf "$OUT/results.tgz" -C "$R" .
cat "$R/gpu_check.log"; tail -n 2 "$R/tests.txt"; grep -E "^ *70b_gate_up +4 +1 " "$R/decode.txt"
