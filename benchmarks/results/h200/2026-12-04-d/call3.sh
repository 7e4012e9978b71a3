# 2026-12-04-d call 3: sfr = prefill_split_first.patch with its in-kernel combine switched off on the
# host (in_kernel_combine() returns false: split tiles go to the reduce kernel, in split-first item
# order); its kernel cubins are byte-identical to sf's. Are sf's whole-tile plans really 1.5-4%
# faster (calls 1 and 2), that is, is ptxas's different schedule of the unchanged consumer loop
# faster, or was it the slow split points around them? main against mainb (A/A) and sfr, 4 rounds,
# int4 and int8, eight layers, M = 512, 1024, 2048, 4096.
source scripts/device_call.sh
dc_begin
mkdir -p prebuilt/mainb && cp prebuilt/_C.so prebuilt/_C_build.json prebuilt/mainb/
ROUNDS=4 dc_ab_prefill "main mainb sfr" \
  "--model llama-3-70b,llama-3-8b --m 512,1024,2048,4096 --paths prefill" \
  "--bits 8 --model llama-3-70b,llama-3-8b --m 512,1024,2048,4096 --paths prefill" 330
