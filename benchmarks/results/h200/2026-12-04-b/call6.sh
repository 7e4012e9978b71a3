# 2026-12-04-b call 6: the M = 160 / 192 anomaly (calls 3, 4) in a kernel timeline of back-to-back
# calls (benchmarks/experiments/decode_timeline.py --path prefill): main (79fea55) and tail, 70B o and
# 70B qkv, int4, each twice. Is the GEMM itself longer in place, or the overlap between calls?
source scripts/device_call.sh
dc_begin
for r in 1 2; do
  for v in main tail; do
    dc_use $v
    timeout 60 python benchmarks/experiments/decode_timeline.py --path prefill --shapes 70b_o 70b_qkv --M 160 192 \
      > $R/timeline_${v}_$r.txt 2>&1
    dc_pack "timeline $v $r"
  done
done
