// The iteration profiler: the job records each iteration time into its control
// block's ring; the controller reads statistics at any time without stopping it.
#ifndef GANDIVA_RUNTIME_PROFILER_H_
#define GANDIVA_RUNTIME_PROFILER_H_

#include <cstdint>

#include "gandiva/contract/control_block.h"

namespace gandiva::runtime {

// Hot path: a handful of relaxed stores, no lock, no syscall, no allocation.
// Single writer (the boundary thread).
inline void RecordIteration(ProfileRing* p, uint64_t iteration_ns, uint64_t now_ns) {
  const uint64_t i = p->iterations.load(std::memory_order_relaxed);
  p->ring_ns[i % kProfileRingSize].store(iteration_ns, std::memory_order_relaxed);
  const uint64_t ewma = p->ewma_ns.load(std::memory_order_relaxed);
  // alpha = 1/8; the first sample seeds it.
  const uint64_t next =
      i == 0 ? iteration_ns
             : static_cast<uint64_t>(
                   static_cast<int64_t>(ewma) +
                   (static_cast<int64_t>(iteration_ns) - static_cast<int64_t>(ewma)) / 8);
  p->ewma_ns.store(next, std::memory_order_relaxed);
  p->total_ns.store(p->total_ns.load(std::memory_order_relaxed) + iteration_ns,
                    std::memory_order_relaxed);
  p->last_boundary_ns.store(now_ns, std::memory_order_relaxed);
  p->iterations.store(i + 1, std::memory_order_release);
}

struct IterationStats {
  uint64_t iterations = 0;
  double mean_ms = 0;  // over all iterations
  double ewma_ms = 0;
  double p50_ms = 0;  // over the last kProfileRingSize iterations
  double p99_ms = 0;
  double iterations_per_s = 0;  // from the EWMA: the current rate when running
  uint64_t last_boundary_ns = 0;
};

// Reader side: any thread or process; tolerates concurrent writes.
IterationStats ReadIterationStats(const ProfileRing& p);

}  // namespace gandiva::runtime

#endif  // GANDIVA_RUNTIME_PROFILER_H_
