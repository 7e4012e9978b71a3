# Helpers for one device call (source it from the call's script; bash only). The device returns at
# most 8 files, so everything lands in one archive, $OUT/res.tgz, re-packed after each stage: a call
# cut short by its time limit still returns what it finished.
#
#   source scripts/device_call.sh
#   dc_begin                                   # variants unpacked, wheels installed, $R = results dir
#   dc_ab "main v1" "--bits 4 8 --M 16 32 --no-cublas"   # interleaved A/B (scripts/ab_variants.sh)
#   dc_ab_prefill "main v1" "--model llama-3-8b --m 64,512 --paths prefill"   # the same for prefill
#   dc_use v1                                  # install prebuilt/v1/_C.so (main: prebuilt/_C.so)
#   dc_run tests 170 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf
#   dc_sanitize -k decode                      # memcheck / racecheck / synccheck on tests -m sanitize -k decode
#
# Carry ["prebuilt"] (and ".whl" only to build on the device); build variants on the CPU machine
# (docs/CONTRIBUTING.md) and pack them into prebuilt/variants.tar.xz (an .so compresses ~10x; the tree
# and what is carried must stay under 64 MiB: pack main's _C.so and _C_build.json into the archive
# too, at its top level, and carry no loose .so).

# dc_unpack: unpack the builds carried in prebuilt/variants.tar.xz (main's at its top level, a variant V
# under V/) into prebuilt/; nothing without the archive. dc_begin, ab_variants.sh and gpu_check.sh's
# prebuilt stage call it.
dc_unpack() {
  if [ -f prebuilt/variants.tar.xz ]; then tar xJf prebuilt/variants.tar.xz -C prebuilt; fi
}

dc_begin() {
  set -u
  dc_unpack
  if compgen -G ".whl/*.whl" > /dev/null; then python3 -m pip install -q --no-index --no-deps .whl/*.whl; fi
  export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
  R=/tmp/res
  rm -rf "$R" && mkdir -p "$R"
  DC_T0=$(date +%s)
}

# dc_pack MESSAGE: log MESSAGE with the seconds since dc_begin, and re-pack $R into $OUT/res.tgz.
dc_pack() {
  echo "$1 $(( $(date +%s) - DC_T0 )) s" | tee -a "$R/log.txt"
  tar czf "$OUT/res.tgz" -C "$R" .
}

# dc_use VARIANT: install a variant's extension and its build record into the package (the tests read
# cuda_archs from the record, ops.build_info(), to know whether the prefill path exists; without it
# they expect none). Returns 1, changing nothing, when the variant has no prebuilt/VARIANT/_C.so.
dc_use() {
  local dir=prebuilt
  [ "$1" != main ] && dir="prebuilt/$1"
  [ -f "$dir/_C.so" ] || return 1
  cp "$dir/_C.so" swordfish_backend/_C.so
  rm -f swordfish_backend/_C_build.json
  [ -f "$dir/_C_build.json" ] && cp "$dir/_C_build.json" swordfish_backend/_C_build.json
  return 0
}

# dc_run NAME SECONDS CMD...: run CMD under a timeout into $R/NAME.txt; log its last line.
dc_run() {
  local name=$1 secs=$2
  shift 2
  timeout "$secs" "$@" > "$R/$name.txt" 2>&1
  dc_pack "$name rc=$?: $(tail -n 1 "$R/$name.txt")"
}

# dc_ab_run SECONDS BENCH...: scripts/ab_variants.sh under a timeout, its knobs (VARIANTS, ROUNDS,
# TESTS, *_ARGS) set by the caller; the A/B tables, its round log (ab_log.txt, beside the call's own
# log.txt) and the named benches' per-round JSON (ab/BENCH/) land in $R. dc_ab and dc_ab_prefill
# below are the two usual settings.
dc_ab_run() {
  local secs=$1 b
  shift
  timeout "$secs" bash scripts/ab_variants.sh > "$R/ab_stdout.txt" 2>&1
  cp /tmp/ab/ab_*.txt "$R"/ 2>/dev/null
  cp /tmp/ab/log.txt "$R/ab_log.txt" 2>/dev/null
  mkdir -p "$R/ab"
  for b in "$@"; do cp -r "/tmp/ab/$b" "$R/ab/" 2>/dev/null; done
  dc_pack ab
}

# dc_ab "VARIANTS" "DECODE_ARGS" [SECONDS]: decode A/B in interleaved rounds (ROUNDS, default 3), the
# first variant the baseline; ab_decode.txt and the per-round JSON land in $R.
dc_ab() {
  VARIANTS="$1" ROUNDS="${ROUNDS:-3}" TESTS="" PREFILL_ARGS="" DECODE_ARGS="$2" dc_ab_run "${3:-150}" decode
}

# dc_ab_prefill "VARIANTS" "PREFILL_ARGS" ["PREFILL8_ARGS" [SECONDS]]: the prefill A/B in interleaved
# rounds (ROUNDS, default 3; an even count balances which variant runs first), the first variant the
# baseline; `swordfish bench` arguments for the int4 sweep and an optional --bits 8 one. The tables
# (ab_prefill*.txt) and the per-round JSON (ab/) land in $R.
dc_ab_prefill() {
  VARIANTS="$1" ROUNDS="${ROUNDS:-3}" TESTS="" DECODE_ARGS="" PREFILL_ARGS="$2" PREFILL8_ARGS="${3:-}" \
    dc_ab_run "${4:-300}" prefill prefill8
}

# dc_sanitize [PYTEST_ARGS...]: compute-sanitizer memcheck, racecheck and synccheck over the tests
# marked `sanitize` (every kernel family; `-k decode` narrows it), exit 99 on any finding.
dc_sanitize() {
  local tool rc
  for tool in memcheck racecheck synccheck; do
    timeout "${SAN_SECONDS:-90}" compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 50 \
      python -m pytest -q -p no:cacheprovider tests -m sanitize "$@" > "$R/san_$tool.txt" 2>&1
    rc=$?
    dc_pack "san $tool rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|passed|failed' "$R/san_$tool.txt" | tr '\n' ' ')"
  done
}
