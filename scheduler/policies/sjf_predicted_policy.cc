// Non-preemptive shortest-job-first on durations predicted from finished jobs
// (DurationPredictor). The prediction is fixed at submission.
#include <set>
#include <tuple>

#include "gandiva/scheduler/duration_predictor.h"
#include "policies/policies.h"

namespace gandiva::sched {
namespace {

class SjfPredictedPolicy : public PolicyBase {
 public:
  using PolicyBase::PolicyBase;
  const char* name() const override { return "sjf-predicted"; }
  void OnArrival(Cluster& c, JobId j) override {
    // Predicted once, at submission: what is learnt later does not reorder it.
    queue_.insert({predictor_.Predict(c.info(j)), c.info(j).submit_time, j});
  }
  void OnFinish(Cluster& c, JobId j) override { predictor_.Observe(c.info(j), c.RunTime(j)); }
  void Schedule(Cluster& c) override {
    while (!queue_.empty()) {
      JobId j = std::get<2>(*queue_.begin());
      auto gpus = Place(c, j);
      if (!gpus || !c.Start(j, *gpus).ok()) break;  // head-of-line, like FIFO
      queue_.erase(queue_.begin());
    }
  }

 private:
  DurationPredictor predictor_;
  std::set<std::tuple<double, double, JobId>> queue_;
};

}  // namespace

std::unique_ptr<Policy> MakeSjfPredictedPolicy(const PolicyOptions& o) {
  return std::make_unique<SjfPredictedPolicy>(o);
}

}  // namespace gandiva::sched
