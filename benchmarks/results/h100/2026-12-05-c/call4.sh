# 2026-12-05-c call 4: A/B of `swordfish bench`'s timing, the interleaved rounds (this commit) against the
# old one block of replays per implementation. The run had an untracked swordfish_backend/bench_prev.py in
# the tree: `git show 3e4429c:swordfish_backend/bench.py` with `ROUNDS = 7` and a `rounds` field added to
# Config (accepted, ignored) so that the new cli.py can drive it. /tmp/old_bench.py swaps it in for bench.
source scripts/device_call.sh; dc_begin; dc_use main
cat > /tmp/old_bench.py <<'PY'
import sys
import swordfish_backend
from swordfish_backend import bench_prev
sys.modules["swordfish_backend.bench"] = bench_prev
swordfish_backend.bench = bench_prev
from swordfish_backend import cli
sys.exit(cli.main(sys.argv[1:]))
PY
dc_run new1 90 python -m swordfish_backend bench -q --json $R/new1.json --png $R/new1.png
dc_run old 90 python /tmp/old_bench.py bench -q --json $R/old.json --png ''
dc_run new2 90 python -m swordfish_backend bench -q --json $R/new2.json --png ''
dc_run cli 120 python -m pytest -q -p no:cacheprovider tests/test_cli.py tests/test_bench_dispatch.py tests/test_bench_decode.py
cat $R/log.txt
