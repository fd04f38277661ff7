// Preemptive priority scheduling shared by SRTF and Tiresias LAS: at each
// instant with waiting jobs, the highest-priority jobs that fit in the
// cluster's GPU count run; the rest are suspended; leftover GPUs are backfilled.
#ifndef GANDIVA_SRC_SCHED_PREEMPTIVE_POLICY_H_
#define GANDIVA_SRC_SCHED_PREEMPTIVE_POLICY_H_

#include <vector>

#include "policy_base.h"

namespace gandiva::sched {

class PreemptivePolicy : public PolicyBase {
 public:
  using PolicyBase::PolicyBase;
  void OnArrival(Cluster& c, JobId j) override;
  void OnFinish(Cluster& c, JobId j) override;
  void Schedule(Cluster& c) override;

 protected:
  // All active (pending or running) jobs, highest priority first.
  virtual void Order(Cluster& c, std::vector<JobId>* out) = 0;
  virtual void OnActivated(Cluster&, JobId) {}
  virtual void OnDeactivated(Cluster&, JobId) {}
  virtual void OnStarted(Cluster&, JobId) {}
  // Lets a subclass force a pass (e.g. a LAS demotion) even with no arrival.
  void MarkDirty() { dirty_ = true; }

 private:
  int pending_ = 0;
  bool dirty_ = false;
  std::vector<JobId> order_, desired_;
  std::vector<char> want_;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SRC_SCHED_PREEMPTIVE_POLICY_H_
