// The preemptive priority pass (see preemptive_policy.h).
#include "preemptive_policy.h"

namespace gandiva::sched {

void PreemptivePolicy::OnArrival(Cluster& c, JobId j) {
  ++pending_;
  dirty_ = true;
  OnActivated(c, j);
}

void PreemptivePolicy::OnFinish(Cluster& c, JobId j) {
  dirty_ = true;
  OnDeactivated(c, j);
}

void PreemptivePolicy::Schedule(Cluster& c) {
  // Nothing waits, or nothing changed since the last pass: the running set stands.
  if (pending_ == 0 || !dirty_) return;
  dirty_ = false;
  Order(c, &order_);
  // 1. The highest-priority jobs that fit in the cluster by GPU count.
  int budget = c.topology().num_gpus();
  desired_.clear();
  for (JobId j : order_) {
    EnsureSize(want_, j, char{0});
    want_[j] = 0;
  }
  for (JobId j : order_) {
    if (budget <= 0) break;
    int n = c.info(j).num_gpus;
    if (n > budget) continue;
    budget -= n;
    want_[j] = 1;
    desired_.push_back(j);
  }
  // 2. Preempt running jobs that lost their place, if someone wanted waits.
  bool waiting = false;
  for (JobId j : desired_) waiting |= c.state(j) == JobState::kPending;
  if (!waiting) return;
  for (JobId j : order_) {
    if (!want_[j] && c.state(j) == JobState::kRunning && c.Suspend(j).ok()) ++pending_;
  }
  // 3. Start the wanted pending jobs in priority order, then backfill.
  for (int pass = 0; pass < 2; ++pass) {
    for (JobId j : order_) {
      if (c.free_gpus().total_free() == 0) break;
      if (c.state(j) != JobState::kPending || (pass == 0 && !want_[j])) continue;
      auto gpus = Place(c, j);
      if (gpus && c.Start(j, *gpus).ok()) {
        --pending_;
        OnStarted(c, j);
      } else if (pass == 0) {
        dirty_ = true;  // retry at the next instant (e.g. a locality wake-up)
      }
    }
  }
}

}  // namespace gandiva::sched
