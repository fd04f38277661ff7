#!/usr/bin/env bash
# Records the synthetic traces in this folder: the shim's test programs (tests/shim/apps)
# run under the real shim and the stand-in driver (a TEST DOUBLE) with
# GANDIVA_SHIM_TRACE. See README.md. Usage: record_synthetic.sh BUILD_DIR [OUT_DIR]
set -euo pipefail
build=$(cd "${1:?usage: record_synthetic.sh BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$(cd "$(dirname "$0")" && pwd)}
apps=$build/tests/shim
common=(LD_PRELOAD="$build/shim/libgandiva_shim.so" LD_LIBRARY_PATH="$apps/standin"
        GD_STANDIN_KERNEL_NS=2000 GANDIVA_LOG=warn)

record() {  # name, extra environment..., --, program and arguments
  local name=$1
  shift
  local env=()
  while [ "$1" != "--" ]; do env+=("$1"); shift; done
  shift
  env "${common[@]}" "${env[@]}" GANDIVA_SHIM_TRACE="$out/$name.gdtrace" "$@" > /dev/null
  echo "$name.gdtrace: $(stat -c %s "$out/$name.gdtrace") bytes"
}

# Direct link, two worker threads launching on their own, a graph per iteration.
record direct_threads_graph -- "$apps/gd_shim_direct_app" --image "$apps/kernels.cubin" \
  --iterations 40 --threads 2 --graph
# cudart's path (cuGetProcAddress with versions and per-thread flags), start-up copies
# that are not iterations, and calls the driver refuses.
record procaddr_startup_refused -- "$apps/gd_shim_procaddr_app" --image "$apps/kernels.fatbin" \
  --iterations 60 --startup-copies 100 --bad-calls
# A job under a memory cap asking beyond it in every capped call (the shim refuses).
record memcap_hog GANDIVA_GPU_MEMORY_BYTES=$((128 << 20)) GD_STANDIN_DEVICE_MEM=$((1 << 30)) -- \
  "$apps/gd_shim_memcap_app" --role hog
# cuMemAlloc not backed by the VMM API (GANDIVA_SHIM_VMM=0): nothing a swap could move.
record direct_no_vmm GANDIVA_SHIM_VMM=0 -- "$apps/gd_shim_direct_app" --image "$apps/kernels.cubin" \
  --iterations 30
