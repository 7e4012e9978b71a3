# 2026-12-05-b call 3: the whole GPU suite at the session's commit (kernels as in call 1), then the
# README's main job as a newcomer runs it (`swordfish check`, `swordfish bench`, through
# `python -m swordfish_backend`: the device has no network, so the package is not pip-installed there).
source scripts/device_call.sh; dc_begin; dc_use main
dc_run tests 330 python -m pytest -q -n 16 -p no:cacheprovider tests -rf
dc_run check 60 python -m swordfish_backend check
(mkdir -p $R/bench && cd $R/bench && timeout 90 python -m swordfish_backend bench > bench.txt 2>&1; echo "rc=$?" >> bench.txt); dc_pack "bench $(tail -n 1 $R/bench/bench.txt)"
cat $R/log.txt
