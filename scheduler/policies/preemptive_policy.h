// Preemptive priority scheduling shared by SRTF and Tiresias LAS. Pending and
// running jobs sit in two ordered sets; at each instant the best pending job
// starts if it fits, else preempts the worst running jobs that rank below it
// (if that frees enough GPUs); then a bounded backfill fills leftover GPUs.
// Incremental, so a pass costs O(changes x log jobs), not O(active jobs).
#ifndef GANDIVA_SRC_SCHED_PREEMPTIVE_POLICY_H_
#define GANDIVA_SRC_SCHED_PREEMPTIVE_POLICY_H_

#include <set>
#include <tuple>
#include <vector>

#include "policies/policy_base.h"

namespace gandiva::sched {

class PreemptivePolicy : public PolicyBase {
 public:
  using PolicyBase::PolicyBase;
  void OnArrival(Cluster& c, JobId j) override;
  void OnFinish(Cluster& c, JobId j) override;
  void Schedule(Cluster& c) override;

 protected:
  // Smaller runs first; the last element breaks ties (the job id).
  using Key = std::tuple<int, double, JobId>;
  // The job's priority now. Pending jobs' keys must not change while they wait
  // unless the subclass calls Rekey.
  virtual Key PriorityKey(Cluster& c, JobId j) = 0;
  // A key that orders running jobs and stays valid while they run
  // (default: PriorityKey).
  virtual Key RunningKey(Cluster& c, JobId j) { return PriorityKey(c, j); }
  virtual void OnStarted(Cluster&, JobId) {}
  // Re-files a job whose priority changed (a LAS demotion or promotion).
  void Rekey(Cluster& c, JobId j);
  void MarkDirty() { dirty_ = true; }
  // For subclasses that walk the queue (starvation guard).
  const std::set<Key>& pending() const { return pending_; }

 private:
  bool StartOrPreemptFor(Cluster& c, JobId p);
  void StartJob(Cluster& c, JobId j, const std::vector<GpuId>& gpus);
  void Backfill(Cluster& c);

  std::set<Key> pending_, running_;
  std::vector<Key> key_;     // the key each job is filed under
  std::vector<char> where_;  // 0 nowhere, 1 pending_, 2 running_
  bool dirty_ = false;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SRC_SCHED_PREEMPTIVE_POLICY_H_
