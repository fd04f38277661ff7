#!/usr/bin/env bash
# AEGIS-256X4's lane-by-lane code on aarch64 (ARMv8 AES instructions), built
# with Debian's cross compiler and run under qemu, against RFC 10032's vector.
# Skips (77) where g++-aarch64-linux-gnu or qemu-user is not installed: they
# are not among the project's dependencies, only this check's.
set -euo pipefail
src=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! command -v aarch64-linux-gnu-g++ >/dev/null || ! command -v qemu-aarch64 >/dev/null; then
  echo "skipped: needs aarch64-linux-gnu-g++ (g++-aarch64-linux-gnu) and qemu-aarch64 (qemu-user)"
  exit 77
fi
aarch64-linux-gnu-g++ -std=c++20 -O2 -Wall -Wextra -Werror -march=armv8-a+crypto \
  -I"$src/job/contract/src" "$src/tests/job/contract/aegis_vectors_main.cc" \
  "$src/job/contract/src/aegis256x4_lanes.cc" "$src/job/contract/src/cpu_features.cc" \
  -o "$out/aegis_vectors"
qemu-aarch64 -cpu max -L /usr/aarch64-linux-gnu "$out/aegis_vectors"
