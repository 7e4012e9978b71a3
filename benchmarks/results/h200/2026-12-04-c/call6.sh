# 2026-12-04-c call 6: the unbalanced-plan rule (decode keeps M <= 48 where the prefill plan's balance is
# below 0.8) was measured on 2026-12-03-i call 4, before the uniform wgmma descriptors (5d1fe80) made
# BT 64 0.92-0.96x faster; since then 70B o M = 40 / 48 reads decode 1.02-1.04x prefill. The same zone
# shapes again on 30b5057: int4 + int8, decode and prefill forced, 3 interleaved rounds.
source scripts/device_call.sh
dc_begin
dc_use main
SH="8192,10240;8192,12288;8192,14336;5120,16384;6144,12288;8192,8192;8192,7680;8192,17408"
mkdir -p $R/zone
for r in 1 2 3; do
  for b in 4 8; do
    timeout 60 python -m swordfish_backend bench --shapes "$SH" --m 33,40,48,56 --paths decode,prefill --bits $b \
      --json $R/zone/int${b}_r$r.json -q > $R/zone/int${b}_r$r.txt 2>&1
  done
  dc_pack "zone round $r"
done
