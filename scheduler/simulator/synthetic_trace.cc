// The seeded synthetic trace (see synthetic_trace.h).
#include "gandiva/scheduler/synthetic_trace.h"

#include <algorithm>
#include <cmath>

namespace gandiva::sched {
namespace {

// A counter-based generator: draw k of job i is a hash of (seed, i, k), so
// changing one distribution does not shift the others.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in (0, 1): never 0, so its log is finite.
double Uniform(uint64_t seed, int64_t job, uint64_t draw) {
  uint64_t h = Mix(Mix(Mix(seed) ^ static_cast<uint64_t>(job)) ^ draw);
  return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
}

// Gang sizes as in Philly: most jobs take one GPU, few take many.
int DrawGpus(double u, int max_gpus) {
  static constexpr struct {
    double below;
    int gpus;
  } kSizes[] = {{0.70, 1}, {0.80, 2}, {0.90, 4}, {0.97, 8}, {0.99, 16}, {1.01, 32}};
  int n = 32;
  for (const auto& s : kSizes)
    if (u < s.below) {
      n = s.gpus;
      break;
    }
  return std::min(n, std::max(1, max_gpus));
}

// Seconds: 60% of jobs are short (30 s - 1 h), 30% hours (1 - 12 h), 10% run
// for days (12 h - 5 d); log-uniform within each band.
double DrawDuration(double band, double u) {
  double lo = 30, hi = 3600;
  if (band >= 0.9) {
    lo = 43200, hi = 432000;
  } else if (band >= 0.6) {
    lo = 3600, hi = 43200;
  }
  return lo * std::exp(u * std::log(hi / lo));
}

}  // namespace

Trace SyntheticTrace(const SyntheticTraceOptions& o) {
  Trace t;
  t.format = "synthetic";
  const int64_t n = std::max<int64_t>(0, o.jobs);
  t.jobs.resize(n);
  double gpu_seconds = 0;
  for (int64_t i = 0; i < n; ++i) {
    TraceJob& j = t.jobs[i];
    j.num_gpus = DrawGpus(Uniform(o.seed, i, 0), o.max_gpus);
    j.duration = DrawDuration(Uniform(o.seed, i, 1), Uniform(o.seed, i, 2));
    gpu_seconds += j.duration * j.num_gpus;
  }
  // Poisson arrivals whose span makes the demand offered_load of the cluster.
  double span = gpu_seconds / (std::max(1e-9, o.offered_load) * std::max(1, o.cluster_gpus));
  double mean_gap = n > 0 ? span / n : 0, now = 0;
  for (int64_t i = 0; i < n; ++i) {
    t.jobs[i].submit_time = now;
    now += -std::log(Uniform(o.seed, i, 3)) * mean_gap;
  }
  return t;
}

}  // namespace gandiva::sched
