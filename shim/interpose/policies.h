// What the shim does around each hooked call: the policies named in hooks.def.
// Launch path (Launch, LaunchEx, Issue): the gate's one atomic load, a per-thread
// counter and detector update (plain stores on the thread's own slot), then the
// driver's function; its result is returned unchanged. Never throws, locks or allocates.
// Every policy runs the driver through trace::Traced: with GANDIVA_SHIM_TRACE set it
// records the call (trace/trace_hooks.h); otherwise that costs one load and a branch.
#ifndef GANDIVA_SHIM_POLICIES_H_
#define GANDIVA_SHIM_POLICIES_H_

#include <cstdint>

#include "boundary/job_link.h"
#include "boundary/thread_state.h"
#include "interpose/driver.h"
#include "memory/memory_cap.h"
#include "memory/memory_tracker.h"
#include "trace/trace_hooks.h"

namespace gandiva::shim {

// Resolves a cuGetProcAddress answer to the shim's wrapper when it is a hooked entry.
void* WrapProcAddress(const char* symbol, int version, cuuint64_t flags, void* real);

namespace policy {

template <typename T>
inline uint64_t Token(T handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}

// kernel_work: what the launch weighs for the detector (a kernel 1, a graph more, a copy 0).
inline void FeedLaunch(HookId id, uint64_t token, uint32_t kernel_work) {
  ThreadSlot* s = CurrentThreadSlot();
  CountCall(s, id);
  if (__builtin_expect(!s->shared && !s->serving_park, 1)) s->detector.OnLaunch(token, kernel_work);
}

template <HookId Id>
inline constexpr uint32_t kKernelWork =
    Id == HookId::cuGraphLaunch || Id == HookId::cuGraphLaunch_ptsz ? PeriodDetector::kGraphWork
                                                                    : 1;

struct Attach {
  template <HookId Id, typename... A>
  static CUresult Run(A... a) {
    CountCall(CurrentThreadSlot(), Id);
    // The first call loads the driver and attaches the job.
    return trace::Traced<Id>([&] { return Real<Id>::Get()(a...); },
                             [&](trace::TraceRecord& rec) { trace::FillArgs(rec, a...); });
  }
};

struct Launch {  // first argument: the kernel or graph
  template <HookId Id, typename F, typename... A>
  static CUresult Run(F f, A... a) {
    Gate();
    FeedLaunch(Id, Token(f), kKernelWork<Id>);
    return trace::Traced<Id, false>(
        [&] { return Real<Id>::Get()(f, a...); },
        [&](trace::TraceRecord& rec) { trace::FillLaunch(rec, f, a...); });
  }
};

struct LaunchEx {  // (config, kernel, ...)
  template <HookId Id, typename C, typename F, typename... A>
  static CUresult Run(C config, F f, A... a) {
    Gate();
    FeedLaunch(Id, Token(f), 1);
    return trace::Traced<Id, false>(
        [&] { return Real<Id>::Get()(config, f, a...); },
        [&](trace::TraceRecord& rec) { trace::FillLaunchEx(rec, config, f); });
  }
};

struct Issue {  // copies and memsets: the kind of call is the token, not its size
  template <HookId Id, typename... A>
  static CUresult Run(A... a) {
    Gate();
    FeedLaunch(Id, 0x155e00000000ull | HookTraits<Id>::kKind, 0);  // no device work of its own
    return trace::Traced<Id, false>([&] { return Real<Id>::Get()(a...); },
                                    [&](trace::TraceRecord& rec) { trace::FillArgs(rec, a...); });
  }
};

struct Sync {
  template <HookId Id, typename... A>
  static CUresult Run(A... a) {
    ThreadSlot* s = CurrentThreadSlot();
    CountCall(s, Id);
    int decided = 0;
    const CUresult r = trace::Traced<Id>(
        [&] {
          const CUresult sync = Real<Id>::Get()(a...);
          if (sync == CUDA_SUCCESS) decided = OnHostSync(s, HookTraits<Id>::kKind);
          return sync;
        },
        [&](trace::TraceRecord& rec) {
          trace::FillArgs(rec, a...);
          rec.arg[3] = rec.arg[4] = 0;
          trace::FillSync(rec, s, decided);
        },
        [&](const trace::TraceRecord& rec) {  // what the shim holds at the boundary
          if (decided & kSyncBoundary) trace::EmitBoundaryMark(rec.t_ns + rec.dur_ns);
        });
    return r;
  }
};

struct Capture {
  template <HookId Id, typename... A>
  static CUresult Run(A... a) {
    CaptureGate();
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    return trace::Traced<Id>([&] { return Real<Id>::Get()(a...); },
                             [&](trace::TraceRecord& rec) { trace::FillArgs(rec, a...); });
  }
};

// cuGetProcAddress (v1 and v2): the driver answers, and a hooked function's answer is
// replaced by the shim's wrapper. The trace keeps the symbol, the version asked for,
// the flags and whether the shim answered.
template <HookId Id, typename Call>
inline CUresult TracedProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                  Call&& call) {
  void* answer = nullptr;
  return trace::Traced<Id>(
      [&] {
        const CUresult r = call();
        if (r == CUDA_SUCCESS && pfn && *pfn) {
          answer = *pfn;
          *pfn = WrapProcAddress(symbol, version, flags, *pfn);
        }
        return r;
      },
      [&](trace::TraceRecord& rec) {
        trace::FillSymbol(rec, symbol);
        rec.aux = static_cast<uint16_t>(version < 0 || version > 0xffff ? 0xffff : version);
        rec.arg[4] = flags;
        if (answer && *pfn != answer) rec.flags |= trace::kFlagWrapped;
      });
}

struct ProcAddress {
  template <HookId Id>
  static CUresult Run(const char* symbol, void** pfn, int version, cuuint64_t flags) {
    CountCall(CurrentThreadSlot(), Id);
    return TracedProcAddress<Id>(symbol, pfn, version, flags,
                                 [&] { return Real<Id>::Get()(symbol, pfn, version, flags); });
  }
};

struct ProcAddressV2 {
  template <HookId Id>
  static CUresult Run(const char* symbol, void** pfn, int version, cuuint64_t flags,
                      CUdriverProcAddressQueryResult* found) {
    CountCall(CurrentThreadSlot(), Id);
    return TracedProcAddress<Id>(symbol, pfn, version, flags, [&] {
      return Real<Id>::Get()(symbol, pfn, version, flags, found);
    });
  }
};

// Memory calls: the record ends with what the shim tracks after the call (arg[4]).
template <HookId Id, typename Call, typename Fill>
inline CUresult TracedMemory(Call&& call, Fill&& fill) {
  return trace::Traced<Id>(call, [&](trace::TraceRecord& rec) {
    fill(rec);
    rec.arg[4] = trace::TrackedBytes();
  });
}

struct MemAlloc {
  template <HookId Id>
  static CUresult Run(CUdeviceptr* dptr, size_t size) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    if (!LoadDriver()) return CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
    return TracedMemory<Id>([&] { return MemoryTracker::Get().Alloc(dptr, size); },
                            [&](trace::TraceRecord& rec) {
                              rec.arg[0] = rec.result == CUDA_SUCCESS && dptr ? *dptr : 0;
                              rec.arg[1] = size;
                            });
  }
};

struct MemFree {
  template <HookId Id>
  static CUresult Run(CUdeviceptr ptr) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    if (!LoadDriver()) return CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
    return TracedMemory<Id>([&] { return MemoryTracker::Get().Free(ptr); },
                            [&](trace::TraceRecord& rec) { rec.arg[0] = ptr; });
  }
};

struct MemFreeAsync {
  template <HookId Id>
  static CUresult Run(CUdeviceptr ptr, CUstream stream) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    if (!LoadDriver()) return CUDA_ERROR_SHARED_OBJECT_INIT_FAILED;
    return TracedMemory<Id>(
        [&] { return MemoryTracker::Get().FreeAsync(ptr, stream, Real<Id>::Get()); },
        [&](trace::TraceRecord& rec) { trace::FillArgs(rec, ptr, stream); });
  }
};

// The driver picks the pitch, so the least it can take (width x height) is charged
// against the cap before it is asked, and the row padding after. Padding beyond the
// cap gives the allocation back: the one case where a capped allocation reaches the
// driver and still fails.
struct TrackPitch {
  template <HookId Id>
  static CUresult Run(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                      unsigned int elem) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    return TracedMemory<Id>(
        [&] { return Allocate<Id>(dptr, pitch, width, height, elem); },
        [&](trace::TraceRecord& rec) {
          rec.arg[0] = rec.result == CUDA_SUCCESS && dptr ? *dptr : 0;
          rec.arg[1] = rec.result == CUDA_SUCCESS && pitch ? uint64_t{*pitch} * height : 0;
          rec.arg[2] = width;
          rec.arg[3] = height;
          rec.aux = static_cast<uint16_t>(elem);
        });
  }

  template <HookId Id>
  static CUresult Allocate(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                           unsigned int elem) {
    MemoryCap& cap = MemoryCap::Process();
    uint64_t least = 0;
    if (__builtin_mul_overflow(width, height, &least)) {
      if (cap.enabled()) return CUDA_ERROR_OUT_OF_MEMORY;
      least = 0;  // uncapped: the driver refuses it
    }
    if (!cap.TryCharge(least)) return CUDA_ERROR_OUT_OF_MEMORY;
    const CUresult r = Real<Id>::Get()(dptr, pitch, width, height, elem);
    if (r != CUDA_SUCCESS) {
      cap.Release(least);
      return r;
    }
    const uint64_t bytes = static_cast<uint64_t>(*pitch) * height;
    if (!cap.TryCharge(bytes - least)) {
      Real<HookId::cuMemFree_v2>::Get()(*dptr);
      cap.Release(least);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    MemoryTracker::Get().Track(*dptr, bytes, AllocKind::kPitch, nullptr);
    return r;
  }
};

// Charges `size` against the cap, then calls the driver; gives the charge back if
// the driver fails. A refused charge never reaches the driver.
template <typename Call>
inline CUresult Charged(uint64_t size, Call&& call) {
  MemoryCap& cap = MemoryCap::Process();
  if (!cap.TryCharge(size)) return CUDA_ERROR_OUT_OF_MEMORY;
  const CUresult r = call();
  if (r != CUDA_SUCCESS) cap.Release(size);
  return r;
}

struct TrackManaged {
  template <HookId Id>
  static CUresult Run(CUdeviceptr* dptr, size_t size, unsigned int flags) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    return TracedMemory<Id>(
        [&] {
          const CUresult r = Charged(size, [&] { return Real<Id>::Get()(dptr, size, flags); });
          if (r == CUDA_SUCCESS)
            MemoryTracker::Get().Track(*dptr, size, AllocKind::kManaged, nullptr);
          return r;
        },
        [&](trace::TraceRecord& rec) {
          trace::FillArgs(rec, rec.result == CUDA_SUCCESS ? *dptr : 0, size, flags);
        });
  }
};

struct TrackAsync {
  template <HookId Id>
  static CUresult Run(CUdeviceptr* dptr, size_t size, CUstream stream) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    return TracedMemory<Id>(
        [&] {
          const CUresult r = Charged(size, [&] { return Real<Id>::Get()(dptr, size, stream); });
          if (r == CUDA_SUCCESS) MemoryTracker::Get().Track(*dptr, size, AllocKind::kAsync, stream);
          return r;
        },
        [&](trace::TraceRecord& rec) {
          trace::FillArgs(rec, rec.result == CUDA_SUCCESS ? *dptr : 0, size, stream);
        });
  }
};

struct TrackCreate {
  template <HookId Id>
  static CUresult Run(CUmemGenericAllocationHandle* handle, size_t size,
                      const CUmemAllocationProp* prop, unsigned long long flags) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    return TracedMemory<Id>(
        [&] {
          const CUresult r =
              Charged(size, [&] { return Real<Id>::Get()(handle, size, prop, flags); });
          if (r == CUDA_SUCCESS) MemoryTracker::Get().TrackPhysical(*handle, size);
          return r;
        },
        [&](trace::TraceRecord& rec) {
          trace::FillArgs(rec, rec.result == CUDA_SUCCESS ? *handle : 0, size,
                          prop ? prop->location.id : -1, flags);
        });
  }
};

struct TrackRelease {
  template <HookId Id>
  static CUresult Run(CUmemGenericAllocationHandle handle) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    return TracedMemory<Id>(
        [&] {
          const CUresult r = Real<Id>::Get()(handle);
          if (r == CUDA_SUCCESS) MemoryTracker::Get().UntrackPhysical(handle);
          return r;
        },
        [&](trace::TraceRecord& rec) { rec.arg[0] = handle; });
  }
};

// Reservations the program makes itself hold no bytes of their own (the physical
// memory is counted at cuMemCreate); gated so the table stays still.
// (cuMemAddressReserve's record: the address reserved, size, alignment, address asked, flags.)
struct TrackReserve {
  template <HookId Id, typename... A>
  static CUresult Run(A... a) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    return trace::Traced<Id>([&] { return Real<Id>::Get()(a...); },
                             [&](trace::TraceRecord& rec) { FillReserve(rec, a...); });
  }
  static void FillReserve(trace::TraceRecord& rec, CUdeviceptr* ptr, size_t size, size_t align,
                          CUdeviceptr addr, unsigned long long flags) {
    trace::FillArgs(rec, rec.result == CUDA_SUCCESS ? *ptr : 0, size, align, addr, flags);
  }
  static void FillReserve(trace::TraceRecord& rec, CUdeviceptr ptr, size_t size) {
    trace::FillArgs(rec, ptr, size);
  }
};
using TrackAddressFree = TrackReserve;

// The program's mappings of its own physical memory: that memory lives (and stays
// charged against the cap) until released *and* unmapped.
struct TrackMap {
  template <HookId Id>
  static CUresult Run(CUdeviceptr ptr, size_t size, size_t offset,
                      CUmemGenericAllocationHandle handle, unsigned long long flags) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    return TracedMemory<Id>(
        [&] {
          const CUresult r = Real<Id>::Get()(ptr, size, offset, handle, flags);
          if (r == CUDA_SUCCESS) MemoryTracker::Get().TrackAppMap(ptr, size, handle);
          return r;
        },
        [&](trace::TraceRecord& rec) { trace::FillArgs(rec, ptr, size, offset, handle); });
  }
};

struct TrackUnmap {
  template <HookId Id>
  static CUresult Run(CUdeviceptr ptr, size_t size) {
    Gate();
    CountCall(CurrentThreadSlot(), Id);
    return TracedMemory<Id>(
        [&] {
          const CUresult r = Real<Id>::Get()(ptr, size);
          if (r == CUDA_SUCCESS) MemoryTracker::Get().TrackAppUnmap(ptr, size);
          return r;
        },
        [&](trace::TraceRecord& rec) { trace::FillArgs(rec, ptr, size); });
  }
};

// What the job is told about its device's memory: the cap, when it has one. Not
// gated: asking costs the device nothing.
struct MemInfo {
  template <HookId Id>
  static CUresult Run(size_t* free_bytes, size_t* total_bytes) {
    CountCall(CurrentThreadSlot(), Id);
    return trace::Traced<Id>(
        [&] {
          const CUresult r = Real<Id>::Get()(free_bytes, total_bytes);
          if (r == CUDA_SUCCESS) MemoryCap::Process().Report(free_bytes, total_bytes);
          return r;
        },
        [&](trace::TraceRecord& rec) {  // what the job was told
          if (rec.result != CUDA_SUCCESS || !free_bytes || !total_bytes) return;
          rec.arg[0] = *free_bytes;
          rec.arg[1] = *total_bytes;
        });
  }
};

struct DeviceTotalMem {
  template <HookId Id>
  static CUresult Run(size_t* bytes, CUdevice device) {
    CountCall(CurrentThreadSlot(), Id);
    return trace::Traced<Id>(
        [&] {
          const CUresult r = Real<Id>::Get()(bytes, device);
          if (r == CUDA_SUCCESS && bytes) *bytes = MemoryCap::Process().Total(*bytes);
          return r;
        },
        [&](trace::TraceRecord& rec) {
          trace::FillArgs(rec, rec.result == CUDA_SUCCESS ? *bytes : 0, device);
        });
  }
};

}  // namespace policy

// The shim's function for hook Id, with exactly the PFN's signature.
template <HookId Id, typename Policy, typename Pfn = typename HookTraits<Id>::Pfn>
struct Wrapper;
template <HookId Id, typename Policy, typename R, typename... A>
struct Wrapper<Id, Policy, R(CUDAAPI*)(A...)> {
  static R CUDAAPI Fn(A... a) { return Policy::template Run<Id>(a...); }
};

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_POLICIES_H_
