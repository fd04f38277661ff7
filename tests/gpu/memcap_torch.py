"""GPU only: a PyTorch job under a memory cap (GANDIVA_GPU_MEMORY_BYTES, the shim
preloaded). Checks what torch is told about the device (mem_get_info, the device's
total_memory) and that filling the cap ends in an ordinary torch OOM, with no more
reserved than the cap. Prints what it saw; exits 1 if a check fails."""
import os
import sys

import torch

cap = int(os.environ["GANDIVA_GPU_MEMORY_BYTES"])
block = 64 << 20
failures = []

free, total = torch.cuda.mem_get_info()
print(f"mem_get_info: free {free}, total {total}, cap {cap}")
if total != cap:
    failures.append(f"mem_get_info total {total} is not the cap {cap}")
if free > cap:
    failures.append(f"mem_get_info free {free} is above the cap {cap}")
props_total = torch.cuda.get_device_properties(0).total_memory
print(f"get_device_properties: total_memory {props_total}")
if props_total != cap:
    failures.append(f"total_memory {props_total} is not the cap {cap} (cudart does not "
                    "read cuDeviceTotalMem_v2 through the hooked path?)")

oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
blocks = []
message = ""
try:
    while len(blocks) * block <= 4 * cap:  # a real GPU has room for far more than the cap
        blocks.append(torch.empty(block, dtype=torch.uint8, device="cuda"))
except oom as e:
    message = str(e)
reserved = torch.cuda.memory_reserved()
print(f"blocks {len(blocks)} of {block}, reserved {reserved}")
print(f"OOM: {message.splitlines()[0] if message else '(none)'}")
if not message:
    failures.append("no OOM: the job allocated four times its cap")
if reserved > cap:
    failures.append(f"reserved {reserved} is above the cap {cap}")
if len(blocks) * block < cap - 2 * block:
    failures.append(f"only {len(blocks)} blocks of {block} fitted in a cap of {cap}")
if message and "total capacity of" not in message:
    failures.append("the OOM message does not give the capacity")
del blocks
torch.cuda.empty_cache()
free_after, _ = torch.cuda.mem_get_info()
print(f"after empty_cache: free {free_after}")
if free_after < cap - block:
    failures.append(f"free {free_after} after empty_cache: charges were not given back")

for f in failures:
    print("FAILED:", f)
sys.exit(1 if failures else 0)
