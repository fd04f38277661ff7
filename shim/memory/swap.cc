// Swap-out/in of VMM-backed allocations, and the park hooks that run them.
#include "memory/swap.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "interpose/driver.h"
#include "memory/memory_tracker.h"
#include "memory/scoped_context.h"

namespace gandiva::shim {
namespace {

using runtime::ControlBlock;

constexpr size_t kChunk = 64ull << 20;  // bytes per copy call: bounded driver staging

void* HostAlloc(size_t size, bool* pinned) {
  void* p = nullptr;
  if (Extras().cuMemHostAlloc && Extras().cuMemHostAlloc(&p, size, 0) == CUDA_SUCCESS) {
    *pinned = true;
    return p;
  }
  *pinned = false;  // pinning failed (limits): pageable memory, slower copies
  return std::malloc(size);
}

void HostFree(void* p, bool pinned) {
  if (!p) return;
  if (pinned) {
    Extras().cuMemFreeHost(p);
  } else {
    std::free(p);
  }
}

CUresult CopyOut(const Allocation& a) {
  auto dtoh = Real<HookId::cuMemcpyDtoH_v2>::Get();
  for (size_t off = 0; off < a.size; off += kChunk) {
    const size_t n = a.size - off < kChunk ? a.size - off : kChunk;
    const CUresult r = dtoh(static_cast<char*>(a.host) + off, a.ptr + off, n);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult CopyIn(const Allocation& a) {
  auto htod = Real<HookId::cuMemcpyHtoD_v2>::Get();
  for (size_t off = 0; off < a.size; off += kChunk) {
    const size_t n = a.size - off < kChunk ? a.size - off : kChunk;
    const CUresult r = htod(a.ptr + off, static_cast<const char*>(a.host) + off, n);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// Reads device memory back and compares it with the host copy (all of it, or the
// first and last page of every chunk: catches a mapping at the wrong offset).
bool Verify(const Allocation& a, SwapVerify mode, std::vector<char>* scratch) {
  if (mode == SwapVerify::kNone) return true;
  auto dtoh = Real<HookId::cuMemcpyDtoH_v2>::Get();
  const size_t page = 4096;
  for (size_t off = 0; off < a.size; off += kChunk) {
    const size_t n = a.size - off < kChunk ? a.size - off : kChunk;
    auto check = [&](size_t at, size_t len) {
      scratch->resize(len);
      if (dtoh(scratch->data(), a.ptr + at, len) != CUDA_SUCCESS) return false;
      return std::memcmp(scratch->data(), static_cast<const char*>(a.host) + at, len) == 0;
    };
    if (mode == SwapVerify::kFull || n <= 2 * page) {
      if (!check(off, n)) return false;
    } else if (!check(off, page) || !check(off + n - page, page)) {
      return false;
    }
  }
  return true;
}

void SyncContexts(const std::map<CUdeviceptr, Allocation>& table) {
  std::set<CUcontext> contexts;
  for (const auto& [ptr, a] : table)
    if (a.kind == AllocKind::kVmm) contexts.insert(a.ctx);
  for (CUcontext ctx : contexts) {
    ScopedContext scope(ctx);
    Real<HookId::cuCtxSynchronize>::Get()();
  }
}

void SetState(ControlBlock* cb, runtime::SwapState state) {
  cb->swap_state.store(state, std::memory_order_release);
  runtime::FutexWakeAll(&cb->swap_state);
}

void OnParked(ControlBlock* cb) {
  if (cb->swap_request.load(std::memory_order_acquire) != runtime::kSwapOut) return;
  if (cb->swap_state.load(std::memory_order_relaxed) == runtime::kSwapSwappedOut) return;
  const SwapResult r = SwapOutAll();
  if (r.status != CUDA_SUCCESS) {
    GD_LOG(kError, "shim: swap-out failed (CUresult %d); memory stays resident", r.status);
    SetState(cb, runtime::kSwapFailed);
    return;
  }
  GD_LOG(kInfo, "shim: swapped out %u allocations, %.1f MiB in %.1f ms", r.allocations,
         r.bytes / 1048576.0, r.ns / 1e6);
  SetState(cb, runtime::kSwapSwappedOut);
}

void OnResuming(ControlBlock* cb) {
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

SwapVerify CurrentSwapVerify() {
  const char* v = std::getenv("GANDIVA_SHIM_SWAP_VERIFY");
  if (!v) return SwapVerify::kSample;
  if (std::strcmp(v, "full") == 0) return SwapVerify::kFull;
  if (std::strcmp(v, "none") == 0) return SwapVerify::kNone;
  return SwapVerify::kSample;
}

SwapResult SwapOutAll() {
  const uint64_t start = MonotonicNowNs();
  SwapResult result = MemoryTracker::Get().WithTable([](std::map<CUdeviceptr, Allocation>& table) {
    SwapResult r;
    SyncContexts(table);
    std::vector<Allocation*> copied;
    // Phase 1: copy everything out; nothing is released until all copies succeeded.
    for (auto& [ptr, a] : table) {
      if (a.kind != AllocKind::kVmm || a.swapped) continue;
      a.host = HostAlloc(a.size, &a.host_pinned);
      ScopedContext scope(a.ctx);
      r.status = a.host ? CopyOut(a) : CUDA_ERROR_OUT_OF_MEMORY;
      if (r.status != CUDA_SUCCESS) {
        HostFree(a.host, a.host_pinned);
        a.host = nullptr;
        break;
      }
      copied.push_back(&a);
    }
    if (r.status != CUDA_SUCCESS) {
      for (Allocation* a : copied) {
        HostFree(a->host, a->host_pinned);
        a->host = nullptr;
      }
      return r;
    }
    // Phase 2: release the physical memory, keep the virtual range.
    for (Allocation* a : copied) {
      ScopedContext scope(a->ctx);
      if (Real<HookId::cuMemUnmap>::Get()(a->ptr, a->mapped_size) != CUDA_SUCCESS) {
        HostFree(a->host, a->host_pinned);  // still mapped and intact: stays resident
        a->host = nullptr;
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
  SwapResult result =
      MemoryTracker::Get().WithTable([verify](std::map<CUdeviceptr, Allocation>& table) {
        SwapResult r;
        std::vector<char> scratch;
        for (auto& [ptr, a] : table) {
          if (!a.swapped) continue;
          ScopedContext scope(a.ctx);
          r.status = MemoryTracker::MapPhysical(a.ptr, a.mapped_size, a.device);
          if (r.status != CUDA_SUCCESS) return r;  // no room yet: the rest stays swapped
          r.status = CopyIn(a);
          if (r.status == CUDA_SUCCESS && !Verify(a, verify, &scratch)) {
            GD_LOG(kWarn, "shim: swap-in verification failed at 0x%llx; copying again",
                   static_cast<unsigned long long>(a.ptr));
            r.status = CopyIn(a);
            if (r.status == CUDA_SUCCESS && !Verify(a, verify, &scratch))
              r.status = CUDA_ERROR_UNKNOWN;
          }
          if (r.status != CUDA_SUCCESS) {
            Real<HookId::cuMemUnmap>::Get()(a.ptr,
                                            a.mapped_size);  // try again later, from the host copy
            return r;
          }
          HostFree(a.host, a.host_pinned);
          a.host = nullptr;
          a.swapped = false;
          r.bytes += a.size;
          ++r.allocations;
        }
        return r;
      });
  result.ns = MonotonicNowNs() - start;
  return result;
}

runtime::ParkHooks SwapParkHooks() { return runtime::ParkHooks{&OnParked, &OnResuming}; }

}  // namespace gandiva::shim
