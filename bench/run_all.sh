#!/bin/sh
# Runs the runtime benchmarks (docs/benchmarks.md) from an existing build and
# writes their JSON into one directory. Builds nothing: build first, e.g.
#   cmake --build BUILD -j2 --target bench_boundary bench_switch gandiva_cli _gandiva train_mlp
# and, for the migration bench and the job store bench (run only when built):
#   cmake --build BUILD -j2 --target gandivad transfer_floor synthetic_state_job checksum_speed cipher_speed bench_submit bench_live_pass
#
# Usage: bench/run_all.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, bench-results)
# Env:   PYTHON  interpreter with torch for the slicing bench (default /usr/bin/python3)
set -eu

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
out=${2:-bench-results}
python=${PYTHON:-/usr/bin/python3}

for exe in "$build/bench/job/bench_boundary" "$build/bench/job/bench_switch"; do
  if [ ! -x "$exe" ]; then
    echo "run_all.sh: $exe not built (configure with -DGANDIVA_BUILD_BENCH=ON and build)" >&2
    exit 1
  fi
done
mkdir -p "$out"

echo "== bench_boundary =="
"$build/bench/job/bench_boundary" --out "$out"
echo
echo "== bench_switch =="
"$build/bench/job/bench_switch" --out "$out"
echo
echo "== bench_slicing_throughput =="
"$python" "$here/job/bench_slicing_throughput.py" --build-dir "$build" --out "$out"
echo
echo "== bench_packing =="
"$python" "$here/job/bench_packing.py" --build-dir "$build" --out "$out"
echo
echo "== bench_auto_boundary (the automatic PyTorch boundary against gandiva.step()) =="
"$python" "$here/job/bench_auto_boundary.py" --build-dir "$build" --out "$out"
echo
# A pair that swaps at hand-overs (the CUDA shim on its stand-in): only when built.
if [ -x "$build/tests/shim/gd_shim_procaddr_app" ] && [ -e "$build/shim/libgandiva_shim.so" ]; then
  echo "== bench_swap_slicing (a pair that does not fit together, against back-to-back) =="
  "$python" "$here/job/bench_swap_slicing.py" --build-dir "$build" --out "$out"
  echo
fi
# Migration (~2 minutes, up to ~7 GiB of memory at 2 GiB of state): only when built.
if [ -x "$build/bench/migration/transfer_floor" ] && [ -x "$build/bench/migration/synthetic_state_job" ]; then
  echo "== bench_migration =="
  "$python" "$here/migration/bench_migration.py" --build-dir "$build" --out "$out"
  echo
  echo "== bench_disk (checkpoint to local disk and restore, against dd) =="
  "$python" "$here/migration/bench_disk.py" --build-dir "$build" --out "$out"
  echo
else
  echo "== bench_migration: skipped (build transfer_floor synthetic_state_job to run it) =="
  echo
fi
# The chunks' CRC32C against memcpy (seconds): only when built.
if [ -x "$build/bench/migration/checksum_speed" ]; then
  echo "== checksum_speed =="
  "$build/bench/migration/checksum_speed"
  "$build/bench/migration/checksum_speed" --json >"$out/checksum_speed.json"
  echo
fi
# The bulk channel's ciphers, each code in the build (seconds): only when built.
if [ -x "$build/bench/migration/cipher_speed" ]; then
  echo "== cipher_speed =="
  "$build/bench/migration/cipher_speed"
  "$build/bench/migration/cipher_speed" --json >"$out/cipher_speed.json"
  echo
fi
# The live scheduler's job store (seconds): only when built.
if [ -x "$build/bench/scheduler/bench_live_pass" ]; then
  echo "== bench_live_pass =="
  "$build/bench/scheduler/bench_live_pass" --out "$out"
fi
if [ -x "$build/bench/scheduler/bench_submit" ]; then
  echo "== bench_submit =="
  "$build/bench/scheduler/bench_submit" --out "$out"
  echo
fi
echo "JSON in $out:"
ls "$out"
