// Swap-out/in of VMM-backed allocations (staged through reused pinned buffers,
// overlapped, or into a pinned image), and the park hooks that run them.
#include "memory/swap.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "interpose/driver.h"
#include "memory/driver_release.h"
#include "memory/scoped_context.h"
#include "memory/swap_staging.h"

namespace gandiva::shim {
namespace {

using runtime::ControlBlock;

// ---- Copies of one allocation, or of a whole context's allocations, in chunks.

struct Chunk {
  Allocation* a;
  size_t off;
  size_t n;
};

std::vector<Chunk> ChunksOf(const std::vector<Allocation*>& allocs, size_t chunk) {
  std::vector<Chunk> out;
  for (Allocation* a : allocs)
    for (size_t off = 0; off < a->size; off += chunk)
      out.push_back({a, off, std::min(chunk, a->size - off)});
  return out;
}

CUresult CopyOutSync(const Allocation& a, size_t chunk) {
  auto dtoh = Real<HookId::cuMemcpyDtoH_v2>::Get();
  for (size_t off = 0; off < a.size; off += chunk) {
    const CUresult r =
        dtoh(static_cast<char*>(a.host) + off, a.ptr + off, std::min(chunk, a.size - off));
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult CopyInSync(const Allocation& a, size_t chunk) {
  auto htod = Real<HookId::cuMemcpyHtoD_v2>::Get();
  for (size_t off = 0; off < a.size; off += chunk) {
    const CUresult r =
        htod(a.ptr + off, static_cast<const char*>(a.host) + off, std::min(chunk, a.size - off));
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// Device -> host for every chunk of one context. Pinned images: DMA straight in.
// Pageable images: DMA into ring slot k % slots while the caller copies an earlier
// slot out to the image; a slot is reused only after its copy-out (on this thread).
CUresult CopyOutQueued(const std::vector<Chunk>& chunks, ContextQueue* q, const SwapConfig& c) {
  auto dtoh = Real<HookId::cuMemcpyDtoHAsync_v2>::Get();
  auto event_sync = Real<HookId::cuEventSynchronize>::Get();
  const int slots = c.ring;
  std::vector<const Chunk*> staged;
  for (const Chunk& k : chunks) {
    if (k.a->host_pinned) {
      if (const CUresult r =
              dtoh(static_cast<char*>(k.a->host) + k.off, k.a->ptr + k.off, k.n, q->stream);
          r != CUDA_SUCCESS)
        return r;
    } else {
      staged.push_back(&k);
    }
  }
  size_t issued = 0;
  for (size_t done = 0; done < staged.size(); ++done) {
    while (issued < staged.size() && issued < done + slots) {
      const Chunk& k = *staged[issued];
      const int slot = static_cast<int>(issued % slots);
      if (CUresult r = dtoh(SwapStaging().ring[slot], k.a->ptr + k.off, k.n, q->stream);
          r != CUDA_SUCCESS)
        return r;
      if (CUresult r = Async().event_record(q->events[slot], q->stream); r != CUDA_SUCCESS)
        return r;
      ++issued;
    }
    const Chunk& k = *staged[done];
    const int slot = static_cast<int>(done % slots);
    if (CUresult r = event_sync(q->events[slot]); r != CUDA_SUCCESS) return r;
    ParallelCopy(static_cast<char*>(k.a->host) + k.off, SwapStaging().ring[slot], k.n, c.threads);
  }
  return Real<HookId::cuStreamSynchronize>::Get()(q->stream);  // the pinned images' DMA
}

// Host -> device: the caller fills slot k % slots (after the copy that last read it
// finished) while the DMA of the previous slots runs.
CUresult CopyInQueued(const std::vector<Chunk>& chunks, ContextQueue* q, const SwapConfig& c) {
  auto htod = Real<HookId::cuMemcpyHtoDAsync_v2>::Get();
  auto event_sync = Real<HookId::cuEventSynchronize>::Get();
  const int slots = c.ring;
  size_t staged = 0;
  for (const Chunk& k : chunks) {
    if (k.a->host_pinned) {
      if (CUresult r =
              htod(k.a->ptr + k.off, static_cast<const char*>(k.a->host) + k.off, k.n, q->stream);
          r != CUDA_SUCCESS)
        return r;
      continue;
    }
    const int slot = static_cast<int>(staged % slots);
    if (staged >= static_cast<size_t>(slots)) {
      if (CUresult r = event_sync(q->events[slot]); r != CUDA_SUCCESS) return r;
    }
    ParallelCopy(SwapStaging().ring[slot], static_cast<const char*>(k.a->host) + k.off, k.n,
                 c.threads);
    if (CUresult r = htod(k.a->ptr + k.off, SwapStaging().ring[slot], k.n, q->stream);
        r != CUDA_SUCCESS)
      return r;
    if (CUresult r = Async().event_record(q->events[slot], q->stream); r != CUDA_SUCCESS) return r;
    ++staged;
  }
  return Real<HookId::cuStreamSynchronize>::Get()(q->stream);
}

// Reads device memory back and compares it with the host copy (all of it, or the
// first and last page of every chunk: catches a mapping at the wrong offset).
bool Verify(const Allocation& a, SwapVerify mode, size_t chunk, std::vector<char>* scratch) {
  if (mode == SwapVerify::kNone) return true;
  auto dtoh = Real<HookId::cuMemcpyDtoH_v2>::Get();
  for (size_t off = 0; off < a.size; off += chunk) {
    const size_t n = std::min(chunk, a.size - off);
    auto check = [&](size_t at, size_t len) {
      scratch->resize(len);
      if (dtoh(scratch->data(), a.ptr + at, len) != CUDA_SUCCESS) return false;
      return std::memcmp(scratch->data(), static_cast<const char*>(a.host) + at, len) == 0;
    };
    if (mode == SwapVerify::kFull || n <= 2 * kPage) {
      if (!check(off, n)) return false;
    } else if (!check(off, kPage) || !check(off + n - kPage, kPage)) {
      return false;
    }
  }
  return true;
}

void SyncContexts(const std::vector<CUcontext>& contexts) {
  for (CUcontext ctx : contexts) {
    ScopedContext scope(ctx);
    Real<HookId::cuCtxSynchronize>::Get()();
  }
}

// The swappable allocations that `pick` selects, grouped by context (table order within).
template <typename Pick>
std::map<CUcontext, std::vector<Allocation*>> ByContext(std::map<CUdeviceptr, Allocation>& table,
                                                        Pick pick) {
  std::map<CUcontext, std::vector<Allocation*>> out;
  for (auto& [ptr, a] : table)
    if (a.kind == AllocKind::kVmm && pick(a)) out[a.ctx].push_back(&a);
  return out;
}

size_t EnvSize(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}

void SetState(ControlBlock* cb, runtime::SwapState state) {
  cb->swap_state.store(state, std::memory_order_release);
  runtime::FutexWakeAll(&cb->swap_state);
}

// --release driver: the same protocol (swap_request, swap_state), the driver's
// checkpoint API instead of the shim's copies.
void ReleaseThroughDriver(ControlBlock* cb) {
  const DriverReleaseResult r = DriverReleaseOut();
  if (r.status != CUDA_SUCCESS) {
    GD_LOG(kError,
           "shim: releasing device memory through the driver failed at %s (CUresult %d); "
           "memory stays resident",
           r.step, r.status);
    SetState(cb, runtime::kSwapFailed);
    return;
  }
  GD_LOG(kInfo, "shim: the driver took %.1f MiB to host: lock %.2f ms, checkpoint %.1f ms",
         cb->swapped_bytes.load(std::memory_order_relaxed) / 1048576.0, r.lock_ns / 1e6,
         r.move_ns / 1e6);
  SetState(cb, runtime::kSwapSwappedOut);
}

void RestoreThroughDriver(ControlBlock* cb) {
  uint64_t last_log = 0;
  for (;;) {  // as swap-in: the job cannot run without its memory
    const DriverReleaseResult r = DriverReleaseIn();
    if (r.status == CUDA_SUCCESS) {
      GD_LOG(kInfo, "shim: the driver restored device memory: restore %.1f ms, unlock %.2f ms",
             r.lock_ns / 1e6, r.move_ns / 1e6);
      SetState(cb, runtime::kSwapResident);
      return;
    }
    if (cb->swap_state.load(std::memory_order_relaxed) != runtime::kSwapFailed)
      SetState(cb, runtime::kSwapFailed);
    const uint64_t now = MonotonicNowNs();
    if (now - last_log > 5'000'000'000ull) {
      GD_LOG(kWarn, "shim: %s failed (CUresult %d); retrying until the device has room", r.step,
             r.status);
      last_log = now;
    }
    usleep(50'000);
  }
}

void OnParked(ControlBlock* cb) {
  if (cb->swap_request.load(std::memory_order_acquire) != runtime::kSwapOut) return;
  if (cb->swap_state.load(std::memory_order_relaxed) == runtime::kSwapSwappedOut) return;
  if (CurrentReleaseMechanism() == ReleaseMechanism::kDriver) return ReleaseThroughDriver(cb);
  const SwapResult r = SwapOutAll();
  if (r.status != CUDA_SUCCESS) {
    GD_LOG(kError, "shim: swap-out failed (CUresult %d); memory stays resident", r.status);
    SetState(cb, runtime::kSwapFailed);
    return;
  }
  GD_LOG(kInfo, "shim: swapped out %u allocations, %.1f MiB in %.1f ms (%.1f ms host memory)",
         r.allocations, r.bytes / 1048576.0, r.ns / 1e6, r.host_alloc_ns / 1e6);
  SetState(cb, runtime::kSwapSwappedOut);
}

void OnResuming(ControlBlock* cb) {
  if (DriverReleased()) return RestoreThroughDriver(cb);  // whatever the setting says now
  if (cb->swap_state.load(std::memory_order_relaxed) != runtime::kSwapSwappedOut) {
    if (cb->swap_state.load(std::memory_order_relaxed) == runtime::kSwapFailed)
      SetState(cb, runtime::kSwapResident);
    return;
  }
  // The job cannot run without its memory: retry until the device has room again,
  // still parked (other threads stay gated), saying so through swap_state.
  uint64_t last_log = 0;
  for (;;) {
    const SwapResult r = SwapInAll();
    if (r.status == CUDA_SUCCESS) {
      GD_LOG(kInfo, "shim: swapped in %u allocations, %.1f MiB in %.1f ms", r.allocations,
             r.bytes / 1048576.0, r.ns / 1e6);
      SetState(cb, runtime::kSwapResident);
      return;
    }
    if (cb->swap_state.load(std::memory_order_relaxed) != runtime::kSwapFailed)
      SetState(cb, runtime::kSwapFailed);
    const uint64_t now = MonotonicNowNs();
    if (now - last_log > 5'000'000'000ull) {
      GD_LOG(kWarn, "shim: swap-in failed (CUresult %d); retrying until the device has room",
             r.status);
      last_log = now;
    }
    usleep(50'000);
  }
}

}  // namespace

const char* SwapHostName(SwapHost host) {
  switch (host) {
    case SwapHost::kStaged:
      return "staged";
    case SwapHost::kPinned:
      return "pinned";
    case SwapHost::kSync:
      return "sync";
  }
  return "?";
}

SwapConfig CurrentSwapConfig() {
  SwapConfig c;
  if (const char* v = std::getenv("GANDIVA_SHIM_SWAP_HOST")) {
    if (std::strcmp(v, "pinned") == 0) c.host = SwapHost::kPinned;
    if (std::strcmp(v, "sync") == 0) c.host = SwapHost::kSync;
  }
  c.chunk_bytes = std::max<size_t>(
      EnvSize("GANDIVA_SHIM_SWAP_CHUNK_BYTES", c.chunk_bytes) / kPage * kPage, kPage);
  c.ring =
      static_cast<int>(std::clamp<size_t>(EnvSize("GANDIVA_SHIM_SWAP_RING", c.ring), 2, kMaxRing));
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  c.threads = static_cast<int>(std::clamp<size_t>(
      EnvSize("GANDIVA_SHIM_SWAP_THREADS", std::min<size_t>(c.threads, cores)), 1, 16));
  c.keep_host = EnvSize("GANDIVA_SHIM_SWAP_KEEP_HOST", 1) != 0;
  return c;
}

SwapVerify CurrentSwapVerify() {
  const char* v = std::getenv("GANDIVA_SHIM_SWAP_VERIFY");
  if (!v) return SwapVerify::kSample;
  if (std::strcmp(v, "full") == 0) return SwapVerify::kFull;
  if (std::strcmp(v, "none") == 0) return SwapVerify::kNone;
  return SwapVerify::kSample;
}

void ReleaseHostImage(Allocation* a) {
  HostImageFree(a->host, a->size, a->host_pinned);
  a->host = nullptr;
  a->host_pinned = false;
}

SwapResult SwapOutAll() {
  const uint64_t start = MonotonicNowNs();
  const SwapConfig config = CurrentSwapConfig();
  SwapResult result = MemoryTracker::Get().WithTable([&](std::map<CUdeviceptr, Allocation>& table) {
    SwapResult r;
    auto groups = ByContext(table, [](const Allocation& a) { return !a.swapped; });
    std::vector<CUcontext> contexts;
    for (auto& [ctx, allocs] : groups) contexts.push_back(ctx);
    SyncContexts(contexts);
    std::vector<Allocation*> copied;
    // Phase 1: copy everything out; nothing is released until all copies succeeded.
    for (auto& [ctx, allocs] : groups) {
      ScopedContext scope(ctx);
      const uint64_t host_start = MonotonicNowNs();
      for (Allocation* a : allocs) {
        const bool want_pinned = config.host == SwapHost::kPinned;
        if (a->host && a->host_pinned != want_pinned) ReleaseHostImage(a);  // mode changed
        if (!a->host) a->host = HostImageAlloc(a->size, want_pinned, &a->host_pinned);
        if (!a->host) r.status = CUDA_ERROR_OUT_OF_MEMORY;
      }
      r.host_alloc_ns += MonotonicNowNs() - host_start;
      ContextQueue* q = nullptr;
      if (r.status == CUDA_SUCCESS && config.host != SwapHost::kSync && EnsureRing(config))
        q = QueueFor(ctx, config.ring);
      if (r.status == CUDA_SUCCESS && q) {
        r.status = CopyOutQueued(ChunksOf(allocs, config.chunk_bytes), q, config);
      } else if (r.status == CUDA_SUCCESS) {  // no stream, events or ring: synchronous copies
        for (Allocation* a : allocs)
          if ((r.status = CopyOutSync(*a, config.chunk_bytes)) != CUDA_SUCCESS) break;
      }
      if (r.status != CUDA_SUCCESS) break;
      copied.insert(copied.end(), allocs.begin(), allocs.end());
    }
    if (r.status != CUDA_SUCCESS) {
      for (auto& [ctx, allocs] : groups)
        for (Allocation* a : allocs)
          ReleaseHostImage(a);  // a failure may be host memory: give it back
      return r;
    }
    // Phase 2: release the physical memory, keep the virtual range.
    for (Allocation* a : copied) {
      ScopedContext scope(a->ctx);
      if (Real<HookId::cuMemUnmap>::Get()(a->ptr, a->mapped_size) != CUDA_SUCCESS) {
        if (!config.keep_host) ReleaseHostImage(a);  // still mapped and intact: stays resident
        continue;
      }
      a->swapped = true;
      r.bytes += a->size;
      ++r.allocations;
    }
    return r;
  });
  result.ns = MonotonicNowNs() - start;
  return result;
}

SwapResult SwapInAll() {
  const uint64_t start = MonotonicNowNs();
  const SwapVerify verify = CurrentSwapVerify();
  const SwapConfig config = CurrentSwapConfig();
  SwapResult result = MemoryTracker::Get().WithTable([&](std::map<CUdeviceptr, Allocation>& table) {
    SwapResult r;
    std::vector<char> scratch;
    auto groups = ByContext(table, [](const Allocation& a) { return a.swapped; });
    for (auto& [ctx, allocs] : groups) {
      ScopedContext scope(ctx);
      // Map first: with no room on the device, what is mapped stays, the rest stays
      // swapped, and a later call finishes (the copies below cover only the mapped).
      std::vector<Allocation*> mapped;
      for (Allocation* a : allocs) {
        r.status = MemoryTracker::MapPhysical(a->ptr, a->mapped_size, a->device);
        if (r.status != CUDA_SUCCESS) break;
        mapped.push_back(a);
      }
      ContextQueue* q = nullptr;
      if (config.host != SwapHost::kSync && EnsureRing(config)) q = QueueFor(ctx, config.ring);
      CUresult copy = CUDA_SUCCESS;
      if (q) copy = CopyInQueued(ChunksOf(mapped, config.chunk_bytes), q, config);
      for (Allocation* a : mapped) {
        CUresult s = copy;
        if (!q) s = CopyInSync(*a, config.chunk_bytes);
        if (s == CUDA_SUCCESS && !Verify(*a, verify, config.chunk_bytes, &scratch)) {
          GD_LOG(kWarn, "shim: swap-in verification failed at 0x%llx; copying again",
                 static_cast<unsigned long long>(a->ptr));
          s = CopyInSync(*a, config.chunk_bytes);
          if (s == CUDA_SUCCESS && !Verify(*a, verify, config.chunk_bytes, &scratch))
            s = CUDA_ERROR_UNKNOWN;
        }
        if (s != CUDA_SUCCESS) {
          Real<HookId::cuMemUnmap>::Get()(a->ptr,
                                          a->mapped_size);  // again later, from the host copy
          if (r.status == CUDA_SUCCESS) r.status = s;
          continue;
        }
        if (!config.keep_host) ReleaseHostImage(a);
        a->swapped = false;
        r.bytes += a->size;
        ++r.allocations;
      }
      if (r.status != CUDA_SUCCESS) return r;
    }
    return r;
  });
  result.ns = MonotonicNowNs() - start;
  return result;
}

runtime::ParkHooks SwapParkHooks() { return runtime::ParkHooks{&OnParked, &OnResuming}; }

}  // namespace gandiva::shim
