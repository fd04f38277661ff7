// Online duration predictor for SJF built on a CART regression tree of
// log(run time), after PAI (NSDI'22): recurring jobs are predictable from
// their features. Learns from finished jobs only; the tree is refitted every
// `retrain_every` finishes on the last `window` of them.
#ifndef GANDIVA_SCHED_TREE_DURATION_PREDICTOR_H_
#define GANDIVA_SCHED_TREE_DURATION_PREDICTOR_H_

#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "gandiva/scheduler/duration_predictor.h"
#include "gandiva/scheduler/regression_tree.h"
#include "gandiva/scheduler/types.h"

namespace gandiva::sched {

struct TreePredictorOptions {
  int retrain_every = 500;  // finished jobs between refits
  int window = 20000;       // most recent finished jobs a fit sees
  int min_train = 200;      // below this, use the back-off predictor
  TreeOptions tree{/*max_depth=*/10, /*min_leaf=*/30, /*min_gain=*/1e-9};
};

class TreeDurationPredictor {
 public:
  explicit TreeDurationPredictor(TreePredictorOptions options = {});
  // Predicted run time in seconds for a job being submitted now. Remembers the
  // job's features as they are now, so that its finish trains on what was
  // known at submission (no peeking).
  double PredictAtSubmit(const JobInfo& job);
  // Records a finished job's run time; refits when due.
  void Observe(const JobInfo& job, double seconds);
  int fits() const { return fits_; }

 private:
  std::vector<double> Features(const JobInfo& job) const;
  void Refit();
  struct Sample {
    std::vector<double> x;
    double log_seconds;
  };
  TreePredictorOptions options_;
  // Back-off group means: both the fallback before the first fit and a
  // feature of the tree (the history of the job's own group).
  DurationPredictor backoff_;
  // Recency, the signal of recurring jobs: last run times of each
  // (VC, user, GPUs) group, newest last.
  std::unordered_map<uint64_t, std::deque<double>> recent_;
  std::unordered_map<JobId, std::vector<double>> pending_features_;
  std::deque<Sample> window_;
  std::optional<RegressionTree> tree_;
  int since_fit_ = 0;
  int fits_ = 0;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_TREE_DURATION_PREDICTOR_H_
