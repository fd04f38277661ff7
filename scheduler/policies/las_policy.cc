// Tiresias discretised 2D-LAS: jobs sit in queues by attained GPU service
// (GPUs x executed seconds); a job that crosses a threshold is demoted at that
// moment; within a queue, first come first served. Preemptive.
#include <queue>
#include <tuple>

#include "policies/policies.h"
#include "policies/preemptive_policy.h"

namespace gandiva::sched {
namespace {

class LasPolicy : public PreemptivePolicy {
 public:
  using PreemptivePolicy::PreemptivePolicy;
  const char* name() const override { return "las"; }

  void Schedule(Cluster& c) override {
    Demote(c);
    if (opt_.las_starve_factor > 0) Promote(c);
    PreemptivePolicy::Schedule(c);
    if (!crossings_.empty()) c.WakeAt(std::get<0>(crossings_.top()));
  }

 protected:
  Key PriorityKey(Cluster& c, JobId j) override {
    EnsureSize(queue_, j, 0);
    return {queue_[j], c.info(j).submit_time, j};
  }
  void OnStarted(Cluster& c, JobId j) override {
    EnsureSize(epoch_, j, 0u);
    ++epoch_[j];  // earlier crossings of this job are stale
    PushCrossing(c, j);
  }

 private:
  // When running job j will reach its queue's threshold, if it keeps running.
  void PushCrossing(Cluster& c, JobId j) {
    const auto& th = opt_.las_thresholds;
    if (queue_[j] >= static_cast<int>(th.size())) return;
    double left = th[queue_[j]] - c.Attained(j);
    crossings_.push({c.Now() + std::max(0.0, left) / c.info(j).num_gpus, j, epoch_[j]});
  }

  void Demote(Cluster& c) {
    const auto& th = opt_.las_thresholds;
    while (!crossings_.empty() && std::get<0>(crossings_.top()) <= c.Now()) {
      auto [t, j, epoch] = crossings_.top();
      crossings_.pop();
      // Stopped since, or restarted (and re-armed then).
      if (c.state(j) != JobState::kRunning || epoch != epoch_[j]) continue;
      int q = queue_[j];
      double attained = c.Attained(j);
      while (q < static_cast<int>(th.size()) && attained >= th[q] - 1e-6) ++q;
      if (q != queue_[j]) {
        queue_[j] = q;
        Rekey(c, j);
      }
      PushCrossing(c, j);  // next threshold, or the same one later if it stalled
    }
  }

  // Tiresias' starvation guard: a job waiting longer than factor x its executed
  // time returns to the top queue.
  void Promote(Cluster& c) {
    std::vector<JobId> promote;
    for (const auto& [q, submit, j] : pending())
      if (q > 0 && c.Now() - c.PendingSince(j) >= opt_.las_starve_factor * c.RunTime(j))
        promote.push_back(j);
    for (JobId j : promote) {
      queue_[j] = 0;
      Rekey(c, j);
    }
  }

  std::vector<int> queue_;
  std::vector<uint32_t> epoch_;
  using Crossing = std::tuple<double, JobId, uint32_t>;
  std::priority_queue<Crossing, std::vector<Crossing>, std::greater<>> crossings_;
};

}  // namespace

std::unique_ptr<Policy> MakeLasPolicy(const PolicyOptions& o) {
  return std::make_unique<LasPolicy>(o);
}

}  // namespace gandiva::sched
