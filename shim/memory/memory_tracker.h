// The table of live device allocations of this process (address, size, context,
// stream, how it was made) and the VMM backing of cuMemAlloc: reserve a virtual
// range, create physical memory, map it, so that swap can later release the physical
// part and map new memory at the same address.
// Thread-safety: all methods lock one mutex; none is on the launch path.
// Totals go to the control block (device_bytes, device_allocations) on every change.
#ifndef GANDIVA_SHIM_MEMORY_TRACKER_H_
#define GANDIVA_SHIM_MEMORY_TRACKER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "interpose/cuda_api.h"

namespace gandiva::shim {

enum class AllocKind : uint8_t {
  kVmm,      // cuMemAlloc backed by reserve+create+map: swappable at a stable address
  kPlain,    // cuMemAlloc passed through (small, VMM off or unsupported): stays resident
  kPitch,    // cuMemAllocPitch
  kManaged,  // cuMemAllocManaged
  kAsync,    // cuMemAllocAsync (stream-ordered pool)
};
const char* AllocKindName(AllocKind kind);

struct Allocation {
  CUdeviceptr ptr = 0;
  size_t size = 0;         // bytes the program asked for
  size_t mapped_size = 0;  // kVmm: size rounded up to the device's granularity
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;  // kAsync: the stream it was allocated on
  CUdevice device = 0;
  AllocKind kind = AllocKind::kPlain;
  // Order of creation among this process's allocations (checkpoints match
  // allocations between processes by their rank in this order).
  uint64_t seq = 0;
  // Made after the job's first iteration boundary: a new process, which restores a
  // checkpoint at its first boundary, would not have made it yet.
  bool after_first_boundary = false;
  // Swap state (kVmm only).
  bool swapped = false;
  void* host = nullptr;
  bool host_pinned = false;
};

// What an allocation is charged against the job's memory cap (memory_cap.h): the
// device memory it holds, resident or swapped out.
inline uint64_t CapCharge(const Allocation& a) {
  return a.mapped_size != 0 ? a.mapped_size : a.size;
}

struct MemoryTotals {
  uint64_t device_bytes = 0;  // resident: live allocations + app physical memory
  uint64_t allocations = 0;
  uint64_t swapped_bytes = 0;
  uint64_t vmm_bytes = 0;  // of which swappable
};

class MemoryTracker {
 public:
  static MemoryTracker& Get();

  // cuMemAlloc: VMM-backed when enabled and large enough, else the driver's own.
  CUresult Alloc(CUdeviceptr* dptr, size_t size);
  // cuMemFree / cuMemFreeAsync for any tracked or untracked pointer.
  CUresult Free(CUdeviceptr ptr);
  CUresult FreeAsync(CUdeviceptr ptr, CUstream stream, PFN_cuMemFreeAsync_v11020 real);

  void Track(CUdeviceptr ptr, size_t size, AllocKind kind, CUstream stream);
  void Untrack(CUdeviceptr ptr);
  // Physical memory the program makes with the VMM API itself. As on the device, it
  // lives (counted, and charged against the cap) until it is released and every
  // mapping of it is gone: a program may release a handle right after mapping it.
  void TrackPhysical(CUmemGenericAllocationHandle handle, size_t size);
  void UntrackPhysical(CUmemGenericAllocationHandle handle);  // cuMemRelease
  void TrackAppMap(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle handle);
  void TrackAppUnmap(CUdeviceptr va, size_t size);

  MemoryTotals Totals();
  // Bytes of physical memory the program made itself with cuMemCreate.
  uint64_t PhysicalBytes();

  // How the live allocations differ from those at the job's first iteration
  // boundary (where a new process restores a checkpoint): made since, or freed since.
  struct Drift {
    uint64_t live = 0;
    uint64_t made_after = 0;        // live allocations made after the first boundary
    uint64_t made_after_bytes = 0;  // their bytes
    uint64_t freed_after = 0;       // allocations from before it, freed after it
  };
  Drift DriftSinceFirstBoundary();

  // While the driver holds this process's device memory on the host
  // (memory/driver_release.h), all of it counts as swapped out, none as resident.
  void SetReleasedByDriver(bool released);

  // What the shim would do with device memory now, recorded at each inferred boundary
  // in a trace (trace/): what it tracks, what a swap-out would copy (resident
  // VMM-backed allocations) and what a device-memory checkpoint would write (every
  // tracked allocation), and the drift that decides whether such a checkpoint is refused.
  struct Decisions {
    uint64_t resident_bytes = 0;
    uint64_t swap_out_bytes = 0;
    uint64_t checkpoint_bytes = 0;
    uint64_t allocations = 0;
    uint64_t made_after = 0;
    uint64_t freed_after = 0;
  };
  Decisions CurrentDecisions();

  // Maps fresh physical memory at [va, va+size) on `device` (create, map, set access,
  // release the handle so that unmapping frees it). Used by Alloc and by swap-in.
  static CUresult MapPhysical(CUdeviceptr va, size_t size, CUdevice device);

  // For swap: the table under its lock. The callee may change swap fields only.
  template <typename F>
  auto WithTable(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    auto result = f(live_);
    PublishLocked();
    return result;
  }

 private:
  MemoryTracker();
  size_t Granularity(CUdevice device);
  MemoryTotals TotalsLocked() const;
  void PublishLocked();
  // Every allocation enters and leaves the table through these (drift bookkeeping).
  // Adds a new allocation to the table (takes mu_).
  void Record(CUdeviceptr ptr, size_t size, size_t mapped, CUcontext ctx, CUdevice device,
              AllocKind kind);
  void InsertLocked(Allocation a);
  void EraseLocked(std::map<CUdeviceptr, Allocation>::iterator it);

  std::mutex mu_;
  std::map<CUdeviceptr, Allocation> live_;
  struct Physical {
    size_t size = 0;
    int mappings = 0;
    bool released = false;
  };
  // Forgets the piece (and gives back its charge) once released and unmapped.
  void MaybeForgetPhysicalLocked(std::map<CUmemGenericAllocationHandle, Physical>::iterator it);
  std::map<CUmemGenericAllocationHandle, Physical> physical_;
  // The program's own mappings of tracked physical memory: address -> (size, handle).
  std::map<CUdeviceptr, std::pair<size_t, CUmemGenericAllocationHandle>> app_mappings_;
  uint64_t next_seq_ = 0;
  uint64_t freed_after_first_boundary_ = 0;
  bool vmm_enabled_ = true;
  bool released_by_driver_ = false;  // under mu_
  size_t vmm_min_bytes_ = 1 << 20;
  size_t granularity_[16] = {};
};

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_MEMORY_TRACKER_H_
