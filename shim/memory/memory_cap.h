// A job's device-memory cap (`gandiva run --gpu-memory SIZE`, handed to the job as
// GANDIVA_GPU_MEMORY_BYTES): the job sees the cap as its device's memory and an
// allocation that would take it beyond the cap fails with CUDA_ERROR_OUT_OF_MEMORY
// before the driver is asked, so that a capped job cannot take memory from the jobs
// it shares the device with.
//
// What is charged: the device memory of each tracked allocation (a VMM-backed
// cuMemAlloc at its mapped size, the others at their size; cuMemCreate's physical
// memory), from before the driver is called until the allocation leaves the tracker.
// Swapped-out memory stays charged: it is the job's own and comes back to the same
// addresses, so a swap-in never needs the cap's permission (it maps through the real
// driver directly, not through a hook).
//
// Lock-free: one atomic counter, charged with a compare-and-swap loop against the
// cap; callable from any thread, never throws, never allocates.
#ifndef GANDIVA_SHIM_MEMORY_CAP_H_
#define GANDIVA_SHIM_MEMORY_CAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gandiva::shim {

class MemoryCap {
 public:
  // cap_bytes == 0: no cap (charges are counted, never refused).
  explicit MemoryCap(uint64_t cap_bytes) : cap_(cap_bytes) {}

  // The process's cap, read once from GANDIVA_GPU_MEMORY_BYTES (runtime::
  // kEnvGpuMemoryBytes, a decimal byte count; absent, empty or unreadable: no cap,
  // with a warning for an unreadable value).
  static MemoryCap& Process();

  bool enabled() const { return cap_ != 0; }
  uint64_t cap() const { return cap_; }
  uint64_t charged() const { return charged_.load(std::memory_order_relaxed); }
  // Charges refused so far (GANDIVA_SHIM_REPORT's memory_cap_refused).
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }

  // Adds `bytes` to the charge unless that takes it beyond the cap; false: refused,
  // nothing charged.
  bool TryCharge(uint64_t bytes);
  // Gives back bytes charged before (an allocation freed, or one the driver refused).
  void Release(uint64_t bytes);

  // What cuMemGetInfo reports under the cap: total = min(cap, real total), free =
  // min(real free, total - charged). Unchanged without a cap.
  void Report(size_t* free_bytes, size_t* total_bytes) const;
  // What cuDeviceTotalMem reports: min(cap, real total).
  size_t Total(size_t real_total) const;

 private:
  const uint64_t cap_;
  std::atomic<uint64_t> charged_{0};
  std::atomic<uint64_t> refused_{0};
};

// Reads a cap from the variable's text: a positive decimal byte count. 0 when the
// text is null, empty, or not such a number (then *bad is set, if given).
uint64_t ParseCapBytes(const char* text, bool* bad = nullptr);

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_MEMORY_CAP_H_
