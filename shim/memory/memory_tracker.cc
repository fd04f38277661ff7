// Allocation table and VMM-backed cuMemAlloc.
#include "memory/memory_tracker.h"

#include <cstdlib>
#include <cstring>

#include "boundary/job_link.h"
#include "gandiva/common/log.h"
#include "interpose/driver.h"
#include "memory/memory_cap.h"
#include "memory/swap.h"

namespace gandiva::shim {
namespace {

size_t RoundUp(size_t n, size_t g) { return (n + g - 1) / g * g; }

CUmemAllocationProp DeviceProp(CUdevice device) {
  CUmemAllocationProp prop;
  std::memset(&prop, 0, sizeof(prop));
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

const char* AllocKindName(AllocKind kind) {
  switch (kind) {
    case AllocKind::kVmm:
      return "vmm";
    case AllocKind::kPlain:
      return "plain";
    case AllocKind::kPitch:
      return "pitch";
    case AllocKind::kManaged:
      return "managed";
    case AllocKind::kAsync:
      return "async";
  }
  return "?";
}

MemoryTracker& MemoryTracker::Get() {
  static MemoryTracker* tracker = new MemoryTracker();  // leaked: used until exit
  return *tracker;
}

MemoryTracker::MemoryTracker() {
  if (const char* v = std::getenv("GANDIVA_SHIM_VMM")) vmm_enabled_ = std::strcmp(v, "0") != 0;
  if (const char* v = std::getenv("GANDIVA_SHIM_VMM_MIN_BYTES"))
    vmm_min_bytes_ = std::strtoull(v, nullptr, 0);
}

size_t MemoryTracker::Granularity(CUdevice device) {
  if (device < 0 || device >= 16 || !Extras().cuMemGetAllocationGranularity) return 0;
  if (granularity_[device] == 0) {
    CUmemAllocationProp prop = DeviceProp(device);
    size_t g = 0;
    if (Extras().cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
        CUDA_SUCCESS)
      g = ~size_t{0};  // VMM unsupported: never try again
    granularity_[device] = g;
  }
  return granularity_[device] == ~size_t{0} ? 0 : granularity_[device];
}

CUresult MemoryTracker::MapPhysical(CUdeviceptr va, size_t size, CUdevice device) {
  CUmemAllocationProp prop = DeviceProp(device);
  CUmemGenericAllocationHandle handle = 0;
  CUresult r = Real<HookId::cuMemCreate>::Get()(&handle, size, &prop, 0);
  if (r != CUDA_SUCCESS) return r;
  r = Real<HookId::cuMemMap>::Get()(va, size, 0, handle, 0);
  if (r == CUDA_SUCCESS) {
    CUmemAccessDesc access;
    std::memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = Extras().cuMemSetAccess ? Extras().cuMemSetAccess(va, size, &access, 1)
                                : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS) Real<HookId::cuMemUnmap>::Get()(va, size);
  }
  // The mapping keeps the physical memory alive; unmapping it frees it.
  Real<HookId::cuMemRelease>::Get()(handle);
  return r;
}

CUresult MemoryTracker::Alloc(CUdeviceptr* dptr, size_t size) {
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  if (Extras().cuCtxGetCurrent) Extras().cuCtxGetCurrent(&ctx);
  const bool device_ok =
      Extras().cuCtxGetDevice && Extras().cuCtxGetDevice(&device) == CUDA_SUCCESS;
  size_t gran = 0;
  if (vmm_enabled_ && dptr && size >= vmm_min_bytes_ && size > 0 && device_ok) {
    std::lock_guard<std::mutex> lock(mu_);
    gran = Granularity(device);
  }
  // The cap is charged for what the device gives (the mapped size when VMM-backed)
  // before the driver is asked, so a refused allocation touches no neighbour's memory.
  MemoryCap& cap = MemoryCap::Process();
  const size_t charge = gran != 0 ? RoundUp(size, gran) : size;
  if (dptr && !cap.TryCharge(charge)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (gran != 0) {
    const size_t mapped = charge;
    CUdeviceptr va = 0;
    if (Real<HookId::cuMemAddressReserve>::Get()(&va, mapped, gran, 0, 0) == CUDA_SUCCESS) {
      if (MapPhysical(va, mapped, device) == CUDA_SUCCESS) {
        Record(va, size, mapped, ctx, device, AllocKind::kVmm);
        *dptr = va;
        return CUDA_SUCCESS;
      }
      Real<HookId::cuMemAddressFree>::Get()(va, mapped);
    }
    // Out of memory or VMM trouble: the driver's own allocator decides, charged for
    // the size it is asked for.
    cap.Release(charge - size);
  }
  const CUresult r = Real<HookId::cuMemAlloc_v2>::Get()(dptr, size);
  if (r == CUDA_SUCCESS) {
    Record(*dptr, size, 0, ctx, device, AllocKind::kPlain);
  } else if (dptr) {
    cap.Release(size);
  }
  return r;
}

CUresult MemoryTracker::Free(CUdeviceptr ptr) {
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end() || it->second.kind != AllocKind::kVmm) {
      const CUresult r = Real<HookId::cuMemFree_v2>::Get()(ptr);
      if (r == CUDA_SUCCESS && it != live_.end()) EraseLocked(it);
      return r;
    }
    a = it->second;
    EraseLocked(it);
  }
  // cuMemFree synchronises implicitly; unmapping memory still in use must not be faster.
  Real<HookId::cuCtxSynchronize>::Get()();
  if (!a.swapped) Real<HookId::cuMemUnmap>::Get()(a.ptr, a.mapped_size);
  ReleaseHostImage(&a);  // swapped out, or kept from an earlier swap cycle
  return Real<HookId::cuMemAddressFree>::Get()(a.ptr, a.mapped_size);
}

CUresult MemoryTracker::FreeAsync(CUdeviceptr ptr, CUstream stream,
                                  PFN_cuMemFreeAsync_v11020 real) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    if (it == live_.end() || it->second.kind != AllocKind::kVmm) {
      const CUresult r = real(ptr, stream);
      if (r == CUDA_SUCCESS && it != live_.end()) EraseLocked(it);
      return r;
    }
  }
  // A VMM-backed cuMemAlloc freed stream-ordered: wait for the stream, then free.
  Real<HookId::cuStreamSynchronize>::Get()(stream);
  return Free(ptr);
}

void MemoryTracker::Track(CUdeviceptr ptr, size_t size, AllocKind kind, CUstream stream) {
  Allocation a;
  a.ptr = ptr;
  a.size = size;
  a.kind = kind;
  a.stream = stream;
  if (Extras().cuCtxGetCurrent) Extras().cuCtxGetCurrent(&a.ctx);
  if (Extras().cuCtxGetDevice) Extras().cuCtxGetDevice(&a.device);
  std::lock_guard<std::mutex> lock(mu_);
  InsertLocked(a);
}

void MemoryTracker::Untrack(CUdeviceptr ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = live_.find(ptr); it != live_.end()) EraseLocked(it);
}

namespace {

// The job has passed its first iteration boundary (explicit or inferred, in any copy
// of the runtime): the phase leaves "starting" there and never returns to it.
bool PastFirstBoundary() {
  const runtime::ControlBlock* cb = JobControlBlock();
  return cb && cb->phase.load(std::memory_order_acquire) != runtime::kPhaseStarting;
}

}  // namespace

void MemoryTracker::Record(CUdeviceptr ptr, size_t size, size_t mapped, CUcontext ctx,
                           CUdevice device, AllocKind kind) {
  Allocation a;
  a.ptr = ptr;
  a.size = size;
  a.mapped_size = mapped;
  a.ctx = ctx;
  a.device = device;
  a.kind = kind;
  std::lock_guard<std::mutex> lock(mu_);
  InsertLocked(a);
}

void MemoryTracker::InsertLocked(Allocation a) {
  a.seq = next_seq_++;
  a.after_first_boundary = PastFirstBoundary();
  live_[a.ptr] = a;
  PublishLocked();
}

void MemoryTracker::EraseLocked(std::map<CUdeviceptr, Allocation>::iterator it) {
  if (!it->second.after_first_boundary && PastFirstBoundary()) ++freed_after_first_boundary_;
  MemoryCap::Process().Release(CapCharge(it->second));
  live_.erase(it);
  PublishLocked();
}

MemoryTracker::Drift MemoryTracker::DriftSinceFirstBoundary() {
  std::lock_guard<std::mutex> lock(mu_);
  Drift d;
  d.live = live_.size();
  d.freed_after = freed_after_first_boundary_;
  for (const auto& [ptr, a] : live_) {
    if (!a.after_first_boundary) continue;
    ++d.made_after;
    d.made_after_bytes += a.size;
  }
  return d;
}

void MemoryTracker::TrackPhysical(CUmemGenericAllocationHandle handle, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  physical_[handle] = Physical{size, 0, false};
  PublishLocked();
}

void MemoryTracker::UntrackPhysical(CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = physical_.find(handle);
  if (it == physical_.end()) return;
  it->second.released = true;
  MaybeForgetPhysicalLocked(it);
}

void MemoryTracker::TrackAppMap(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = physical_.find(handle);
  if (it == physical_.end()) return;  // not the program's own (or made before the shim)
  ++it->second.mappings;
  app_mappings_[va] = {size, handle};
}

void MemoryTracker::TrackAppUnmap(CUdeviceptr va, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  // The range may cover several whole mappings.
  for (auto m = app_mappings_.lower_bound(va); m != app_mappings_.end() && m->first < va + size;) {
    if (auto it = physical_.find(m->second.second); it != physical_.end()) {
      --it->second.mappings;
      MaybeForgetPhysicalLocked(it);
    }
    m = app_mappings_.erase(m);
  }
}

void MemoryTracker::MaybeForgetPhysicalLocked(
    std::map<CUmemGenericAllocationHandle, Physical>::iterator it) {
  if (!it->second.released || it->second.mappings > 0) return;
  MemoryCap::Process().Release(it->second.size);
  physical_.erase(it);
  PublishLocked();
}

MemoryTracker::Decisions MemoryTracker::CurrentDecisions() {
  std::lock_guard<std::mutex> lock(mu_);
  Decisions d;
  d.resident_bytes = TotalsLocked().device_bytes;
  d.allocations = live_.size();
  d.freed_after = freed_after_first_boundary_;
  for (const auto& [ptr, a] : live_) {
    if (a.kind == AllocKind::kVmm && !a.swapped) d.swap_out_bytes += a.size;
    d.checkpoint_bytes += a.size;
    if (a.after_first_boundary) ++d.made_after;
  }
  return d;
}

MemoryTotals MemoryTracker::Totals() {
  std::lock_guard<std::mutex> lock(mu_);
  return TotalsLocked();
}

uint64_t MemoryTracker::PhysicalBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [handle, p] : physical_) bytes += p.size;
  return bytes;
}

MemoryTotals MemoryTracker::TotalsLocked() const {
  MemoryTotals t;
  for (const auto& [ptr, a] : live_) {
    ++t.allocations;
    if (a.swapped) {
      t.swapped_bytes += a.size;
    } else {
      t.device_bytes += a.size;
    }
    if (a.kind == AllocKind::kVmm) t.vmm_bytes += a.size;
  }
  for (const auto& [handle, p] : physical_) {
    ++t.allocations;
    t.device_bytes += p.size;
  }
  if (released_by_driver_) {
    t.swapped_bytes += t.device_bytes;
    t.device_bytes = 0;
  }
  return t;
}

void MemoryTracker::SetReleasedByDriver(bool released) {
  std::lock_guard<std::mutex> lock(mu_);
  released_by_driver_ = released;
  PublishLocked();
}

void MemoryTracker::PublishLocked() {
  runtime::ControlBlock* cb = JobControlBlock();
  if (!cb) return;
  const MemoryTotals t = TotalsLocked();
  cb->device_bytes.store(t.device_bytes, std::memory_order_relaxed);
  cb->device_allocations.store(t.allocations, std::memory_order_relaxed);
  cb->swapped_bytes.store(t.swapped_bytes, std::memory_order_relaxed);
}

}  // namespace gandiva::shim
