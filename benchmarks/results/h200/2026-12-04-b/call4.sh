# 2026-12-04-b call 4: why the last m tile's x box matters both ways (call 3: loading only its rows made
# M = 160 0.75-0.81x and M = 192 1.07-1.17x on 70B qkv / o, every round). Each build (main = 5d1fe80,
# tail), 70B o and 70B qkv at M = 160 / 192, prefill forced, with nvidia-smi clock / power / throttle
# samples every 100 ms; then the gemm kernel alone under ncu at base clocks (no power-cap effect).
source scripts/device_call.sh
dc_begin
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
smi=$!
for r in 1 2; do
  for v in main tail; do
    dc_use $v
    echo "=== $v round $r $(date +%T.%N)" >> $R/bench.txt
    timeout 60 python -m swordfish_backend bench --shapes "8192,8192;8192,10240" --m 160,192 --paths prefill \
      --png '' --json '' -q >> $R/bench.txt 2>&1
    echo "=== end $(date +%T.%N)" >> $R/bench.txt
  done
done
kill $smi
dc_pack bench
for v in main tail; do
  dc_use $v
  for M in 160 192; do
    timeout 60 ncu --clock-control base -k regex:gemm_kernel --launch-skip 20 -c 3 \
      --metrics gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed \
      python -m swordfish_backend bench --shapes "8192,8192" --m $M --paths prefill --png '' --json '' -q \
      > $R/ncu_${v}_m$M.txt 2>&1
  done
  dc_pack "ncu $v"
done
