# 2026-12-04-d call 2: (a) is sf's 0.96-0.97x on whole-tile plans in call 1 real? Its kernels run the
# same code on those plans but ptxas scheduled the consumer loop differently. main against mainb (a
# byte-identical copy: the A/A band) and sf, 4 rounds, int4 and int8, eight layers, M = 512, 1024,
# 2048 (5-6 whole plans each). (b) the dense tier against prefill above M = 4096 on the eight layers,
# int4 and int8, 5 interleaved rounds: where int8's small layers cross (call 4 of 2026-12-04-c had
# dense 2-3.5% ahead on the four 8B layers at 8192) and whether int4 crosses below 16384.
source scripts/device_call.sh
dc_begin
mkdir -p prebuilt/mainb && cp prebuilt/_C.so prebuilt/_C_build.json prebuilt/mainb/
ROUNDS=4 dc_ab_prefill "main mainb sf" \
  "--model llama-3-70b,llama-3-8b --m 512,1024,2048 --paths prefill" \
  "--bits 8 --model llama-3-70b,llama-3-8b --m 512,1024,2048 --paths prefill" 200
dc_use main && dc_run dense_cross 200 python benchmarks/bench_dispatch.py --bits 4 8 --m 4096,6144,8192,12288,16384 \
  --paths prefill,dense,cublas --rounds 5 --no-dequant --out $R/dense_cross
