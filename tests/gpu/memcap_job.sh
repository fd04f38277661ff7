#!/bin/sh
# GPU only: memory caps on the real driver under the shim. Two capped driver-API jobs
# side by side (memcap_app: the one beyond its cap is refused in every capped call,
# the other keeps its bytes and its share), then, where torch has CUDA, a PyTorch job
# under a cap (memcap_torch.py: what torch is told, and an ordinary OOM at the cap).
# Exits 77 (CTest: skipped) without a GPU.
# Usage: memcap_job.sh LIBGANDIVA_SHIM MEMCAP_APP PYTHON memcap_torch.py
set -u
shim=$1 app=$2 python=$3 script=$4
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no NVIDIA GPU: skipped"; exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
GANDIVA_GPU_MEMORY_BYTES=$((256 << 20)) LD_PRELOAD=$shim \
  "$app" --role keeper --ready "$dir/ready" --go "$dir/go" &
keeper=$!
i=0
while [ ! -e "$dir/ready" ]; do
  i=$((i + 1))
  [ $i -gt 3000 ] && { echo "the keeper never got ready"; kill $keeper; exit 1; }
  kill -0 $keeper 2>/dev/null || { echo "the keeper failed"; exit 1; }
  sleep 0.01
done
GANDIVA_GPU_MEMORY_BYTES=$((384 << 20)) LD_PRELOAD=$shim "$app" --role hog ||
  { echo "the job beyond its cap was not refused, or was told a wrong total"; kill $keeper; exit 1; }
touch "$dir/go"
wait $keeper || { echo "the keeper's bytes or share changed"; exit 1; }
echo "driver API: ok"

if "$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  GANDIVA_GPU_MEMORY_BYTES=$((1 << 30)) LD_PRELOAD=$shim "$python" "$script" || exit 1
else
  echo "no CUDA-enabled torch: the PyTorch half skipped"
fi
echo ok
