// Where swapped bytes go on the host and how they get there: host images (pageable
// or pinned), a small pool of memcpy threads, the reused ring of pinned staging
// buffers, and per context a stream with an event per ring slot. Used by swap.cc
// only; everything here is called under the memory tracker's lock, which a swap
// holds throughout, so none of it locks on its own (the copy pool's threads aside).
#ifndef GANDIVA_SHIM_MEMORY_SWAP_STAGING_H_
#define GANDIVA_SHIM_MEMORY_SWAP_STAGING_H_

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "interpose/cuda_api.h"
#include "memory/swap.h"

namespace gandiva::shim {

inline constexpr int kMaxRing = 16;
inline constexpr size_t kPage = 4096;

// Driver entry points the swap uses that the shim does not hook (null when the
// driver lacks them; swap then falls back to synchronous copies).
struct AsyncApi {
  PFN_cuStreamCreate_v2000 stream_create = nullptr;
  PFN_cuEventCreate_v2000 event_create = nullptr;
  PFN_cuEventRecord_v2000 event_record = nullptr;
};
const AsyncApi& Async();

// A host image for `size` swapped bytes: pinned (cuMemHostAlloc, portable across
// contexts) when asked and possible (*pinned says), else pageable (mmap'd).
void* HostImageAlloc(size_t size, bool want_pinned, bool* pinned);
void HostImageFree(void* p, size_t size, bool pinned);

// memcpy of n bytes split over up to `threads` threads, the caller being one: one
// thread's memcpy (10-20 GB/s) cannot keep up with a PCIe 5 link (~55 GB/s).
void ParallelCopy(void* dst, const void* src, size_t n, int threads);

// Per context: a stream and an event per ring slot.
struct ContextQueue {
  CUstream stream = nullptr;
  CUevent events[kMaxRing] = {};
};

// The pinned ring, reused across swaps, and the contexts' queues.
struct Staging {
  char* ring[kMaxRing] = {};
  size_t chunk = 0;
  int slots = 0;
  std::map<CUcontext, ContextQueue> queues;
};
Staging& SwapStaging();

// The ring for `config` (reallocated only when the chunk size or slot count changed).
bool EnsureRing(const SwapConfig& config);
// The current context's stream and events, made once (the context must be current).
ContextQueue* QueueFor(CUcontext ctx, int slots);

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_MEMORY_SWAP_STAGING_H_
