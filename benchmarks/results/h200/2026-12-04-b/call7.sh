# 2026-12-04-b call 7: tail against main again with balanced order (4 rounds, the order reversed every
# round), plus mainb, a byte-identical copy of main's build: an A/A control for the A/B method's own
# bias and spread. int4, eight layers, M = 100-1100, prefill path.
source scripts/device_call.sh
dc_begin
cmp prebuilt/_C.so prebuilt/mainb/_C.so && echo "mainb identical to main" > $R/aa_check.txt
VARIANTS="main tail mainb" ROUNDS=4 TESTS="" DECODE_ARGS="" PREFILL8_ARGS="" \
  PREFILL_ARGS="--model llama-3-70b,llama-3-8b --m 100,160,192,300,600,1100 --paths prefill" \
  timeout 240 bash scripts/ab_variants.sh > $R/ab_stdout.txt 2>&1
cp /tmp/ab/ab_*.txt /tmp/ab/log.txt $R/ 2>/dev/null; mkdir -p $R/ab && cp -r /tmp/ab/prefill $R/ab/ 2>/dev/null
dc_pack ab
