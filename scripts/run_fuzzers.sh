#!/usr/bin/env bash
# Runs libFuzzer harnesses built by `make fuzz-build`:
#   run_fuzzers.sh BUILD_DIR SECONDS HARNESS...
# For each harness: first every input under fuzz/regressions/HARNESS (each once:
# a crash that was fixed must stay fixed), then SECONDS of fuzzing on a copy of
# fuzz/corpus/HARNESS in BUILD_DIR/fuzz-work (the repository's seeds are never
# written to). Prints each harness's executions; exits non-zero on any finding,
# whose input libFuzzer leaves in BUILD_DIR/fuzz-work/HARNESS/crash-* (or leak-, timeout-).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1 seconds=$2
shift 2
status=0
for h in "$@"; do
  bin=$build/fuzz/$h
  work=$build/fuzz-work/$h
  rm -rf "$work" && mkdir -p "$work/corpus"
  cp -r "fuzz/corpus/$h/." "$work/corpus/"
  if compgen -G "fuzz/regressions/$h/*" >/dev/null; then
    if ! "$bin" -timeout=25 -artifact_prefix="$work/" fuzz/regressions/"$h"/* >"$work/regressions.log" 2>&1; then
      echo "run_fuzzers: $h FAILED on a regression input (log: $work/regressions.log)"
      tail -30 "$work/regressions.log"
      status=1
      continue
    fi
    echo "run_fuzzers: $h: $(ls fuzz/regressions/"$h" | wc -l) regression inputs pass"
  fi
  # -timeout: an input that takes this long is a finding (a hang), not slowness.
  if ! "$bin" -max_total_time="$seconds" -timeout=25 -print_final_stats=1 \
      -artifact_prefix="$work/" "$work/corpus" >"$work/fuzz.log" 2>&1; then
    echo "run_fuzzers: $h FOUND A BUG (log: $work/fuzz.log; input: $work/crash-*|leak-*|timeout-*)"
    grep -m1 -A20 "ERROR\|runtime error\|deadly signal" "$work/fuzz.log" || tail -30 "$work/fuzz.log"
    status=1
    continue
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/fuzz.log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/fuzz.log")
  cov=$(grep -o 'cov: [0-9]*' "$work/fuzz.log" | tail -1)
  echo "run_fuzzers: $h: ${execs} executions in ${seconds} s (${rate} exec/s), ${cov}, corpus $(ls "$work/corpus" | wc -l) files"
done
exit $status
