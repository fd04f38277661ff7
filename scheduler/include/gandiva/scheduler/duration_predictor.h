// Online duration predictor for SJF: learns from finished jobs only (no
// peeking at the future), backing off from specific to general features.
#ifndef GANDIVA_SCHED_DURATION_PREDICTOR_H_
#define GANDIVA_SCHED_DURATION_PREDICTOR_H_

#include <cstdint>
#include <unordered_map>

#include "gandiva/scheduler/types.h"

namespace gandiva::sched {

class DurationPredictor {
 public:
  // A level is used once it has seen this many jobs.
  explicit DurationPredictor(int min_samples = 3, double prior_seconds = 3600)
      : min_samples_(min_samples), prior_(prior_seconds) {}
  // Records a finished job's run time.
  void Observe(const JobInfo& job, double seconds);
  // Geometric mean of past run times of the most specific matching group:
  // (vc, user, GPUs, job type) -> (vc, GPUs) -> (GPUs) -> everyone -> prior.
  double Predict(const JobInfo& job) const;

 private:
  struct Stat {
    double sum_log = 0;
    int64_t count = 0;
  };
  static uint64_t Key(int level, const JobInfo& job);
  int min_samples_;
  double prior_;
  std::unordered_map<uint64_t, Stat> stats_;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_DURATION_PREDICTOR_H_
