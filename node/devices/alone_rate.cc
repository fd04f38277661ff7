// Alone iteration time and rate_vs_alone; see alone_rate.h.
#include "devices/alone_rate.h"

#include <algorithm>

namespace gandiva::controller {

void AloneRate::Observe(uint64_t now, bool alone, const runtime::ProfileRing& profile) {
  const uint64_t iterations = profile.iterations.load(std::memory_order_acquire);
  if (alone_) Harvest(profile, iterations);
  if (alone && !alone_) first_alone_iteration_ = iterations + kSkipIterations;
  alone_ = alone;
  harvested_ = std::max(harvested_, iterations);

  // The window starts at the job's first iteration: imports and model building
  // before it are not training at a reduced rate.
  if (iterations == 0) return;
  if (progress_.empty() || now >= progress_.back().at_ns + kSampleEveryNs)
    progress_.push_back({now, iterations});
  // Keep one observation older than the window, so a full window is always there.
  while (progress_.size() > 2 && progress_[1].at_ns + kWindowNs <= now) progress_.pop_front();
}

void AloneRate::Harvest(const runtime::ProfileRing& profile, uint64_t iterations) {
  uint64_t from = std::max(harvested_, first_alone_iteration_);
  // The ring keeps the latest kProfileRingSize iterations only.
  if (iterations > runtime::kProfileRingSize)
    from = std::max(from, iterations - runtime::kProfileRingSize);
  for (uint64_t i = from; i < iterations; ++i) {
    const uint64_t ns =
        profile.ring_ns[i % runtime::kProfileRingSize].load(std::memory_order_relaxed);
    if (ns == 0) continue;
    samples_.push_back(ns);
    if (samples_.size() > kKeepSamples) samples_.pop_front();
  }
}

std::optional<uint64_t> AloneRate::AloneNs() const {
  if (samples_.size() < kMinSamples) return std::nullopt;
  std::vector<uint64_t> sorted(samples_.begin(), samples_.end());
  const auto mid = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), mid, sorted.end());
  return *mid;
}

std::optional<double> AloneRate::RateVsAlone(uint64_t now, uint64_t iterations_now) const {
  const auto alone = AloneNs();
  if (!alone || progress_.empty()) return std::nullopt;
  // The newest observation at least a window old, else the oldest if old enough.
  const Progress* from = &progress_.front();
  for (const Progress& p : progress_)
    if (p.at_ns + kWindowNs <= now) from = &p;
  if (now < from->at_ns + kMinWindowNs || iterations_now < from->iterations) return std::nullopt;
  return static_cast<double>(iterations_now - from->iterations) * static_cast<double>(*alone) /
         static_cast<double>(now - from->at_ns);
}

}  // namespace gandiva::controller
