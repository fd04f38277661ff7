// Statistics over the iteration ring; see profiler.h.
#include "gandiva/contract/profiler.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gandiva::runtime {

IterationStats ReadIterationStats(const ProfileRing& p) {
  IterationStats s;
  s.iterations = p.iterations.load(std::memory_order_acquire);
  if (s.iterations == 0) return s;
  s.last_boundary_ns = p.last_boundary_ns.load(std::memory_order_relaxed);
  s.mean_ms = static_cast<double>(p.total_ns.load(std::memory_order_relaxed)) / s.iterations / 1e6;
  s.ewma_ms = static_cast<double>(p.ewma_ns.load(std::memory_order_relaxed)) / 1e6;
  if (s.ewma_ms > 0) s.iterations_per_s = 1000.0 / s.ewma_ms;

  const uint64_t n = std::min<uint64_t>(s.iterations, kProfileRingSize);
  std::vector<uint64_t> window(n);
  for (uint64_t k = 0; k < n; ++k)
    window[k] =
        p.ring_ns[(s.iterations - 1 - k) % kProfileRingSize].load(std::memory_order_relaxed);
  auto quantile = [&](double q) {
    // Nearest rank: the smallest sample with at least q of the samples at or below it.
    size_t rank = static_cast<size_t>(std::ceil(q * n));
    size_t idx = std::min<size_t>(n - 1, rank == 0 ? 0 : rank - 1);
    std::nth_element(window.begin(), window.begin() + idx, window.end());
    return static_cast<double>(window[idx]) / 1e6;
  };
  s.p50_ms = quantile(0.50);
  s.p99_ms = quantile(0.99);
  return s;
}

}  // namespace gandiva::runtime
