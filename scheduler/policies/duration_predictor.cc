// Hierarchical back-off mean of log run times.
#include "gandiva/scheduler/duration_predictor.h"

#include <cmath>

namespace gandiva::sched {
namespace {
constexpr int kLevels = 4;
}  // namespace

uint64_t DurationPredictor::Key(int level, const JobInfo& j) {
  auto mix = [](uint64_t h, uint64_t v) {
    return (h ^ v) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL;
  };
  uint64_t h = mix(0xcbf29ce484222325ULL, static_cast<uint64_t>(level));
  switch (level) {
    case 0:
      h = mix(h, static_cast<uint32_t>(j.vc));
      h = mix(h, static_cast<uint32_t>(j.user));
      h = mix(h, static_cast<uint32_t>(j.num_gpus));
      return mix(h, static_cast<uint32_t>(j.job_type));
    case 1:
      h = mix(h, static_cast<uint32_t>(j.vc));
      return mix(h, static_cast<uint32_t>(j.num_gpus));
    case 2:
      return mix(h, static_cast<uint32_t>(j.num_gpus));
    default:
      return h;
  }
}

void DurationPredictor::Observe(const JobInfo& job, double seconds) {
  double l = std::log(std::max(seconds, 1.0));
  for (int level = 0; level < kLevels; ++level) {
    Stat& s = stats_[Key(level, job)];
    s.sum_log += l;
    ++s.count;
  }
}

double DurationPredictor::Predict(const JobInfo& job) const {
  for (int level = 0; level < kLevels; ++level) {
    auto it = stats_.find(Key(level, job));
    if (it != stats_.end() && it->second.count >= min_samples_)
      return std::exp(it->second.sum_log / static_cast<double>(it->second.count));
  }
  return prior_;
}

}  // namespace gandiva::sched
