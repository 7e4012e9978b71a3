#!/bin/bash
# 2026-12-03-g call 1 (build 3199b82, the previous session's final tree): the whole suite, including
# the deterministic decode case that straddles segments (written after the last device call), and
# compute-sanitizer memcheck / racecheck / synccheck over the decode sanitize cases.
source scripts/device_call.sh
dc_begin
dc_use main
dc_run tests_main 240 python -m pytest -q -n 16 -p no:cacheprovider tests -m "not perf" -rf
SAN_SECONDS=60 dc_sanitize -k "decode"
