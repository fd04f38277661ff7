// Finds the iteration period of a training loop from the stream of kernel launches
// and host-blocking syncs one thread issues, and says which syncs are boundaries.
// Pure and allocation-free: the shim keeps one per issuing thread; tests drive it directly.
//
// Model: syncs cut the stream into segments (launches since the previous sync); a
// segment is summarised by a hash of its launch tokens and the closing sync's kind.
// The loop repeats every `period` segments. After `kLockRepeats` identical periods
// the detector locks; a sync is then a boundary when the last `period` segments equal
// the locked pattern, rotated so that the period starts with its heaviest segment
// (a training step: the sync before the forward pass's burst of launches).
// A period must hold device work: at least kMinKernelWork of kernel launches (a
// graph launch counts as kMinKernelWork), else it is start-up traffic, not a loop:
// a framework loading a model copies every weight to the device and waits for it
// (torch's .cuda(): a copy + a stream sync, ~100 identical "periods" of 0.03 ms),
// with a small initialisation kernel now and then. Such a pattern is never locked
// onto, nor any multiple of it (the shortest repeating period decides).
// Thread-safety: none; one thread owns a detector.
#ifndef GANDIVA_SHIM_PERIOD_DETECTOR_H_
#define GANDIVA_SHIM_PERIOD_DETECTOR_H_

#include <cstdint>

namespace gandiva::shim {

class PeriodDetector {
 public:
  static constexpr int kMaxPeriod = 64;          // segments per iteration we can find
  static constexpr int kLockRepeats = 3;         // identical periods needed to lock
  static constexpr int kHistory = 256;           // segments remembered (>= repeats * max period)
  static constexpr int kConfidenceWindow = 16;   // boundaries the confidence looks back on
  static constexpr uint32_t kMinKernelWork = 2;  // kernel launches a period must hold
  static constexpr uint32_t kGraphWork = kMinKernelWork;  // a graph launch: many kernels

  constexpr PeriodDetector() = default;

  // One launch (token: the kernel or graph handle, or a constant per kind of copy);
  // `kernel_work`: 1 for a kernel, kGraphWork for a graph, 0 for a copy or memset.
  void OnLaunch(uint64_t token, uint32_t kernel_work = 1) {
    segment_hash_ = Mix(segment_hash_ ^ token);
    ++segment_launches_;
    segment_work_ += kernel_work;
  }

  // A host-blocking sync of `kind`; returns true if it is an iteration boundary.
  bool OnSync(uint32_t kind);

  bool locked() const { return period_ != 0; }
  int period() const { return period_; }               // segments per iteration, 0 if unknown
  uint64_t boundaries() const { return boundaries_; }  // incl. ones recognised on locking
  uint64_t segments() const { return segments_; }
  uint32_t launches_per_period() const { return launches_per_period_; }
  // 0..100: share of recent boundaries that closed a clean period, ramping up over
  // the first eight; 0 while unlocked.
  uint32_t confidence_pct() const;

  static constexpr uint64_t Mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
  }

 private:
  uint64_t At(uint64_t i) const { return hash_[i % kHistory]; }  // segment i (absolute)
  bool WindowMatches(uint64_t end) const;  // segments [end-period, end) == pattern
  void TryLock();
  void Lock(int p);
  void Unlock();

  uint64_t segment_hash_ = 0;
  uint32_t segment_launches_ = 0;
  uint32_t segment_work_ = 0;
  uint64_t segments_ = 0;  // closed segments so far
  uint64_t hash_[kHistory] = {};
  uint32_t launches_[kHistory] = {};
  uint32_t work_[kHistory] = {};       // kernel work per segment
  uint16_t run_[kMaxPeriod + 1] = {};  // run_[p]: recent segments equal to the one p earlier

  int period_ = 0;
  uint64_t pattern_[kMaxPeriod] = {};  // the locked period, starting after a boundary
  uint32_t launches_per_period_ = 0;
  uint64_t boundaries_ = 0;
  uint64_t last_boundary_segment_ = 0;  // segments_ at the latest boundary
  uint32_t clean_bits_ = 0;             // 1 = that boundary closed exactly one period
  uint32_t window_filled_ = 0;
};

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_PERIOD_DETECTOR_H_
