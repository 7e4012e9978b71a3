# 2026-12-03-i call 4: (a) does decode beat prefill at M = 33-48 on large layers whose 128-column
# prefill tiles number between half the SMs and the SMs (one m tile: split items in two rounds), as
# on 70B qkv? Zone shapes and controls, int4 + int8, decode and prefill forced, 3 interleaved rounds.
# (b) an ncu profile of the prefill kernel at BT 64 (70B gate_up, M = 64) for the per-stage cost.
source scripts/device_call.sh
dc_begin
dc_use main
SH="8192,10240;8192,12288;8192,14336;5120,16384;6144,12288;8192,8192;8192,7680;8192,17408"
mkdir -p $R/zone
for r in 1 2 3; do
  for b in 4 8; do
    timeout 90 python -m swordfish_backend bench --shapes "$SH" --m 33,40,48,56 --paths decode,prefill --bits $b \
      --json $R/zone/int${b}_r$r.json -q > $R/zone/int${b}_r$r.txt 2>&1
  done
  dc_pack "zone round $r"
done
timeout 120 ncu --clock-control none --set full --import-source no -k regex:gemm_kernel -c 1 -f -o $R/ncu_prefill_m64 \
  python -m swordfish_backend bench --shapes '8192,57344' --m 64 --paths prefill --json '' -q > $R/ncu_prefill_m64.log 2>&1
ncu -i $R/ncu_prefill_m64.ncu-rep > $R/ncu_prefill_m64.txt 2>&1
ncu -i $R/ncu_prefill_m64.ncu-rep --page source --csv --print-source sass > $R/ncu_prefill_m64_sass.csv 2>&1
python benchmarks/ncu_stalls.py $R/ncu_prefill_m64_sass.csv --top 25 > $R/ncu_prefill_m64_stalls.txt 2>&1
dc_pack ncu
