// Host images, the memcpy threads and the pinned staging ring of the swap; see
// swap_staging.h.
#include "memory/swap_staging.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "interpose/driver.h"

namespace gandiva::shim {

const AsyncApi& Async() {
  static const AsyncApi api = [] {
    AsyncApi a;
    void* h = DriverHandle();
    if (!h) return a;
    a.stream_create = reinterpret_cast<PFN_cuStreamCreate_v2000>(RealDlsym(h, "cuStreamCreate"));
    a.event_create = reinterpret_cast<PFN_cuEventCreate_v2000>(RealDlsym(h, "cuEventCreate"));
    a.event_record = reinterpret_cast<PFN_cuEventRecord_v2000>(RealDlsym(h, "cuEventRecord"));
    return a;
  }();
  return api;
}

// ---- Host memory.

// A pageable image: mmap'd (page-aligned, huge pages where the kernel allows, fewer
// faults on first touch), or pinned (cuMemHostAlloc, portable across contexts).
void* HostImageAlloc(size_t size, bool want_pinned, bool* pinned) {
  void* p = nullptr;
  if (want_pinned && Extras().cuMemHostAlloc &&
      Extras().cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS) {
    *pinned = true;
    return p;
  }
  *pinned = false;  // pageable (asked for, or pinning failed: limits)
  p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void HostImageFree(void* p, size_t size, bool pinned) {
  if (!p) return;
  if (pinned) {
    Extras().cuMemFreeHost(p);
  } else {
    munmap(p, size);
  }
}

namespace {

// ---- A few threads for the pinned<->pageable memcpy: one thread's memcpy runs at
// 10-20 GB/s, a PCIe 5 / H100 link at ~55 GB/s. They make no driver calls.
class CopyPool {
 public:
  static CopyPool& Get() {
    static CopyPool* pool = new CopyPool();  // leaked: threads live until exit
    return *pool;
  }

  // Copies n bytes with up to `threads` threads (the caller is one of them).
  void Copy(void* dst, const void* src, size_t n, int threads) {
    EnsureThreads(threads - 1);
    const int helpers = std::min<int>(threads - 1, static_cast<int>(workers_.size()));
    const size_t min_piece = 1 << 20;
    const int parts =
        static_cast<int>(std::min<size_t>(helpers + 1, std::max<size_t>(1, n / min_piece)));
    if (parts <= 1) {
      std::memcpy(dst, src, n);
      return;
    }
    const size_t piece = (n / parts + kPage - 1) / kPage * kPage;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dst_ = static_cast<char*>(dst);
      src_ = static_cast<const char*>(src);
      n_ = n;
      piece_ = piece;
      parts_ = parts;
      pending_.store(parts - 1, std::memory_order_relaxed);
      ++generation_;
    }
    cv_.notify_all();
    std::memcpy(dst, src, std::min(piece, n));  // part 0
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }

 private:
  void EnsureThreads(int want) {
    want = std::min(want, 15);
    while (static_cast<int>(workers_.size()) < want) {
      const int index = static_cast<int>(workers_.size()) + 1;  // part it copies
      try {
        workers_.emplace_back([this, index] { Run(index); });
        workers_.back().detach();
      } catch (...) {  // no thread: fewer helpers (the shim never throws)
        return;
      }
    }
  }

  void Run(int index) {
    uint64_t seen = 0;
    for (;;) {
      char* dst;
      const char* src;
      size_t n, piece;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index >= parts_) continue;
        dst = dst_;
        src = src_;
        n = n_;
        piece = piece_;
      }
      const size_t off = piece * index;
      if (off < n) std::memcpy(dst + off, src + off, std::min(piece, n - off));
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);
        done_cv_.notify_one();
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<std::thread> workers_;
  uint64_t generation_ = 0;
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  size_t n_ = 0, piece_ = 0;
  int parts_ = 0;
  std::atomic<int> pending_{0};
};

}  // namespace

void ParallelCopy(void* dst, const void* src, size_t n, int threads) {
  CopyPool::Get().Copy(dst, src, n, threads);
}

// ---- The pinned ring and, per context, a stream and an event per ring slot.
Staging& SwapStaging() {
  static Staging staging;  // under the memory tracker's lock (swap holds it throughout)
  return staging;
}

// The ring for `config` (reallocated only when the chunk size or slot count changed).
bool EnsureRing(const SwapConfig& config) {
  if (SwapStaging().chunk == config.chunk_bytes && SwapStaging().slots >= config.ring) return true;
  for (int i = 0; i < SwapStaging().slots; ++i) Extras().cuMemFreeHost(SwapStaging().ring[i]);
  SwapStaging().slots = 0;
  SwapStaging().chunk = config.chunk_bytes;
  for (int i = 0; i < config.ring; ++i) {
    void* p = nullptr;
    if (!Extras().cuMemHostAlloc ||
        Extras().cuMemHostAlloc(&p, config.chunk_bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
      return false;
    SwapStaging().ring[SwapStaging().slots++] = static_cast<char*>(p);
  }
  return true;
}

// The current context's stream and events, made once (the context must be current).
ContextQueue* QueueFor(CUcontext ctx, int slots) {
  ContextQueue& q = SwapStaging().queues[ctx];
  const AsyncApi& api = Async();
  if (!api.stream_create || !api.event_create || !api.event_record) return nullptr;
  if (!q.stream && api.stream_create(&q.stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    q.stream = nullptr;
    return nullptr;
  }
  for (int i = 0; i < slots; ++i)
    if (!q.events[i] && api.event_create(&q.events[i], CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
      q.events[i] = nullptr;
      return nullptr;
    }
  return &q;
}

}  // namespace gandiva::shim
