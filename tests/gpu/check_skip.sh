#!/bin/sh
# The GPU suite without a GPU: exits 77 (skipped) with a message that says why.
# Moot on a machine with a GPU (this check then skips itself, exit 77 too).
# Usage: check_skip.sh PYTHON gpu_suite.py
set -u
python=$1 suite=$2
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is here: the no-GPU path is not what runs"; exit 77
fi
out=$("$python" "$suite" --json /dev/null 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 77 ] || { echo "expected exit 77 without a GPU, got $rc"; exit 1; }
echo "$out" | grep -q "^gpu_suite: skipped: no nvidia-smi on PATH" ||
  { echo "the message does not say why it skipped"; exit 1; }
# A GPU-less nvidia-smi (driver tools without a device) must skip too.
fake=$(mktemp -d)
printf '#!/bin/sh\necho "No devices were found"; exit 6\n' > "$fake/nvidia-smi"
chmod +x "$fake/nvidia-smi"
out=$(PATH="$fake:$PATH" "$python" "$suite" --json /dev/null 2>&1); rc=$?
rm -rf "$fake"
[ "$rc" -eq 77 ] && echo "$out" | grep -q "nvidia-smi lists no GPU" ||
  { echo "with an nvidia-smi that lists no GPU: exit $rc: $out"; exit 1; }
echo ok
