"""A registered PyTorch-style job with a caching allocator, on the stand-in driver.

torch here is Debian's CPU build, so the "CUDA" side is played through the
driver API (ctypes on libcuda.so.1, which the preloaded shim hooks): LIVE_MIB of
live buffers held all along, and a CACHE_MIB block a caching allocator would keep
after the iteration freed it. torch.cuda.empty_cache is replaced by one that frees
that cached block (as PyTorch's frees its unused segments), and records when it
was called; the next iteration makes the block again, as the allocator regrows.

Usage: cached_memory_job.py ITERATIONS LIVE_MIB CACHE_MIB RECORD_FILE
"""
import ctypes
import sys
import time

import torch

import gandiva.torch
from gandiva import _gandiva

MIB = 1 << 20
iterations, live_mib, cache_mib, record = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
                                           sys.argv[4])

cuda = ctypes.CDLL("libcuda.so.1")
ctx = ctypes.c_void_p()
assert cuda.cuInit(0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0


def alloc(nbytes, fill):
    ptr = ctypes.c_uint64()
    assert cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)) == 0
    assert cuda.cuMemsetD8_v2(ptr, ctypes.c_ubyte(fill), ctypes.c_size_t(nbytes)) == 0
    return ptr


live = alloc(live_mib * MIB, 0x5A)
cached = None
calls = []


def empty_cache():
    global cached
    calls.append(_gandiva.swap_out_pending())
    if cached is not None:
        assert cuda.cuMemFree_v2(cached) == 0
        cached = None


torch.cuda.is_initialized = lambda: True
torch.cuda.empty_cache = empty_cache

model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
state = gandiva.torch.register(model, opt)
gandiva.torch.attach(opt)
x = torch.randn(16, 8)
while state.iteration < iterations:
    if cached is None:
        cached = alloc(cache_mib * MIB, 0x11)  # the allocator grows back
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    time.sleep(0.002)

# Every live byte survived the swaps.
buf = (ctypes.c_ubyte * (live_mib * MIB))()
assert cuda.cuMemcpyDtoH_v2(buf, live, ctypes.c_size_t(live_mib * MIB)) == 0
assert all(b == 0x5A for b in bytes(buf)[::4096])
with open(record, "w") as f:
    f.write(f"{len(calls)} {sum(calls)}\n")
