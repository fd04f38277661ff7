"""GPU suite: the copy-rate floor with torch: pinned and pageable host<->device
copies of SIZE MiB (best of 5), as JSON on stdout. Usage: copy_rate.py [SIZE_MIB]"""
import json
import sys
import time

import torch

mib = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
n = mib << 20
dev = torch.empty(n, dtype=torch.uint8, device="cuda")
t = time.monotonic()
pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True)
pin_s = time.monotonic() - t
pageable = torch.empty(n, dtype=torch.uint8)
pageable.fill_(1)


def best(fn):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(5):
        t = time.monotonic()
        fn()
        torch.cuda.synchronize()
        out.append(time.monotonic() - t)
    return min(out)


r = {"bytes": n, "pin_s": pin_s,
     "pinned_h2d_s": best(lambda: dev.copy_(pinned, non_blocking=True)),
     "pinned_d2h_s": best(lambda: pinned.copy_(dev, non_blocking=True)),
     "pageable_h2d_s": best(lambda: dev.copy_(pageable)),
     "pageable_d2h_s": best(lambda: pageable.copy_(dev))}
for k in ("pinned_h2d", "pinned_d2h", "pageable_h2d", "pageable_d2h"):
    r[k + "_gbps"] = n / r[k + "_s"] / 1e9
print(json.dumps(r))
