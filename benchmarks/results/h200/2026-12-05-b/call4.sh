# 2026-12-05-b call 4: the ensure_dynamic_smem fix (69f99b1) against what call 3's `swordfish check`
# found (40 act-order prefill cases refused at M = 2047-2049: "gather kernel launch failed: invalid
# argument"): the whole check again, and the act-order / gather GPU tests with the new one.
source scripts/device_call.sh; dc_begin; dc_use main
dc_run check 40 python -m swordfish_backend check
dc_run gather 50 python -m pytest -q -n 8 -p no:cacheprovider tests/test_prefill_gpu.py -k "gather or act_order" -rf
cat $R/log.txt
