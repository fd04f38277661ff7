#!/bin/sh
# GPU only: the cuGetProcAddress test program on the real NVIDIA driver under the
# shim (its kernels really run). Exits 77 (CTest: skipped) without a GPU.
# Usage: run_on_gpu.sh LIBGANDIVA_SHIM PROCADDR_APP FATBIN
set -u
shim=$1 app=$2 image=$3
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no NVIDIA GPU: skipped"; exit 77
fi
report=$(mktemp)
GANDIVA_SHIM_REPORT=$report GANDIVA_SHIM_SWAP_VERIFY=full LD_PRELOAD=$shim \
  "$app" --image "$image" --iterations 50 --threads 2 --graph || exit 1
grep -q "^boundaries 50$" "$report" || { echo "expected 50 inferred boundaries:"; cat "$report"; exit 1; }
grep -q "^calls.cuLaunchKernel " "$report" || exit 1
echo ok
