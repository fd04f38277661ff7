#!/usr/bin/env bash
# The N slowest tests in CTest output logs, slowest first: seconds, the log's
# name (the make target that ran it: test, test-asan) and the test's name.
# Usage: slowest_tests.sh N LOG...
set -euo pipefail
n=${1:?usage: slowest_tests.sh N LOG...}
shift
for f in "$@"; do
  # CTest's line for a finished test: " 12/489 Test  #12: name ....   Passed   1.23 sec"
  sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) .* ([0-9]+\.[0-9]+) sec$/\2 \1/p' "$f" |
    awk -v run="$(basename "$f" .log)" '{ printf "%9.2f  %-10s %s\n", $1, run, $2 }'
done | sort -rn | head -n "$n"
