// Non-preemptive shortest-job-first on durations predicted from finished jobs:
// `sjf-predicted` with the back-off group means (DurationPredictor),
// `sjf-tree` with the regression tree (TreeDurationPredictor). The prediction
// is fixed at submission; each one is kept beside the run time the job then
// had, so the report can say how good the predictor was.
#include <set>
#include <tuple>
#include <unordered_map>

#include "gandiva/scheduler/duration_predictor.h"
#include "gandiva/scheduler/tree_duration_predictor.h"
#include "policies/policies.h"

namespace gandiva::sched {
namespace {

// The back-off predictor behind the interface the policy uses.
class BackoffAdapter {
 public:
  double PredictAtSubmit(const JobInfo& job) { return predictor_.Predict(job); }
  void Observe(const JobInfo& job, double seconds) { predictor_.Observe(job, seconds); }

 private:
  DurationPredictor predictor_;
};

template <typename Predictor>
class SjfPolicy : public PolicyBase {
 public:
  SjfPolicy(const PolicyOptions& o, const char* name) : PolicyBase(o), name_(name) {}
  const char* name() const override { return name_; }
  void OnArrival(Cluster& c, JobId j) override {
    // Predicted once, at submission: what is learnt later does not reorder it.
    double predicted = predictor_.PredictAtSubmit(c.info(j));
    predicted_[j] = predicted;
    queue_.insert({predicted, c.info(j).submit_time, j});
  }
  void OnFinish(Cluster& c, JobId j) override {
    // A live job that goes back to the queue to retry a failed run has not
    // finished: its run so far says nothing of its duration. It arrives again.
    if (c.state(j) != JobState::kFinished) return;
    double run = c.RunTime(j);
    auto it = predicted_.find(j);
    if (it != predicted_.end()) {
      stats_.predictions.push_back({it->second, run});
      predicted_.erase(it);
    }
    predictor_.Observe(c.info(j), run);
  }
  void Schedule(Cluster& c) override {
    while (!queue_.empty()) {
      JobId j = std::get<2>(*queue_.begin());
      auto gpus = Place(c, j);
      if (!gpus || !c.Start(j, *gpus).ok()) break;  // head-of-line, like FIFO
      queue_.erase(queue_.begin());
    }
  }

 private:
  const char* name_;
  Predictor predictor_;
  std::unordered_map<JobId, double> predicted_;
  std::set<std::tuple<double, double, JobId>> queue_;
};

}  // namespace

std::unique_ptr<Policy> MakeSjfPredictedPolicy(const PolicyOptions& o) {
  return std::make_unique<SjfPolicy<BackoffAdapter>>(o, "sjf-predicted");
}

std::unique_ptr<Policy> MakeSjfTreePolicy(const PolicyOptions& o) {
  return std::make_unique<SjfPolicy<TreeDurationPredictor>>(o, "sjf-tree");
}

}  // namespace gandiva::sched
