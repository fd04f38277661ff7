#!/bin/sh
# GPU only: an unmodified PyTorch training loop under the shim on the real driver.
# Checks that cudart's cuGetProcAddress path is hooked (launches seen) and that the
# shim finds the iterations by itself. Exits 77 (CTest: skipped) without GPU or torch.
# Usage: pytorch_job.sh LIBGANDIVA_SHIM PYTHON train_tiny.py
set -u
shim=$1 python=$2 script=$3
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no NVIDIA GPU: skipped"; exit 77
fi
"$python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null ||
  { echo "no CUDA-enabled torch: skipped"; exit 77; }
report=$(mktemp)
GANDIVA_SHIM_REPORT=$report LD_PRELOAD=$shim "$python" "$script" 60 || exit 1
cat "$report"
# torch 2.11 issues ~30 % of its launches through cuLaunchKernelEx: count every launch
# entry point the shim hooks (cuLaunchKernel, cuLaunchKernelEx, cooperative, _ptsz).
launches=$(sed -n 's/^calls.cuLaunch\(Cooperative\)\?Kernel\(Ex\)\?\(_ptsz\)\? //p' "$report" |
  awk '{s+=$1} END {print s+0}')
boundaries=$(sed -n 's/^boundaries //p' "$report")
[ "$launches" -gt 1000 ] || { echo "too few launches seen: $launches"; exit 1; }
# Warm-up iterations (cuDNN/cuBLAS autotuning) may differ; the rest must be found.
[ "${boundaries:-0}" -ge 50 ] || { echo "inferred boundaries: ${boundaries:-0} of 60"; exit 1; }
echo ok
