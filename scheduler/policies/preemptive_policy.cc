// The incremental preemptive priority pass (see preemptive_policy.h).
#include "policies/preemptive_policy.h"

namespace gandiva::sched {
namespace {
constexpr int kBackfillScan = 64;  // pending jobs looked at per backfill
}  // namespace

void PreemptivePolicy::OnArrival(Cluster& c, JobId j) {
  EnsureSize(key_, j);
  EnsureSize(where_, j, char{0});
  key_[j] = PriorityKey(c, j);
  pending_.insert(key_[j]);
  where_[j] = 1;
  dirty_ = true;
}

void PreemptivePolicy::OnFinish(Cluster&, JobId j) {
  if (where_[j] == 2) running_.erase(key_[j]);
  if (where_[j] == 1) pending_.erase(key_[j]);
  where_[j] = 0;
  dirty_ = true;
}

void PreemptivePolicy::Rekey(Cluster& c, JobId j) {
  if (where_[j] == 0) return;
  auto& set = where_[j] == 1 ? pending_ : running_;
  set.erase(key_[j]);
  key_[j] = where_[j] == 1 ? PriorityKey(c, j) : RunningKey(c, j);
  set.insert(key_[j]);
  dirty_ = true;
}

void PreemptivePolicy::StartJob(Cluster& c, JobId j, const std::vector<GpuId>& gpus) {
  if (!c.Start(j, gpus).ok()) return;
  pending_.erase(key_[j]);
  key_[j] = RunningKey(c, j);
  running_.insert(key_[j]);
  where_[j] = 2;
  OnStarted(c, j);
}

bool PreemptivePolicy::StartOrPreemptFor(Cluster& c, JobId p) {
  int n = c.info(p).num_gpus;
  if (auto gpus = Place(c, p)) {
    StartJob(c, p, *gpus);
    return c.state(p) == JobState::kRunning;
  }
  // Which running jobs rank below p, worst first, until enough GPUs would be free.
  Key mine = PriorityKey(c, p);
  int freed = c.free_gpus().total_free();
  std::vector<JobId> victims;
  for (auto it = running_.rbegin(); it != running_.rend() && freed < n; ++it) {
    JobId v = std::get<2>(*it);
    if (!(mine < PriorityKey(c, v))) break;
    victims.push_back(v);
    freed += static_cast<int>(c.gpus(v).size());
  }
  if (freed < n) return false;
  for (JobId v : victims) {
    if (!c.Suspend(v, PreemptionFor(c, v, p)).ok()) continue;
    running_.erase(key_[v]);
    key_[v] = PriorityKey(c, v);
    pending_.insert(key_[v]);
    where_[v] = 1;
  }
  auto gpus = Place(c, p);
  if (!gpus) return false;
  StartJob(c, p, *gpus);
  return c.state(p) == JobState::kRunning;
}

void PreemptivePolicy::Backfill(Cluster& c) {
  int scanned = 0;
  for (auto it = pending_.begin(); it != pending_.end() && scanned < kBackfillScan;) {
    if (c.free_gpus().total_free() == 0) return;
    JobId j = std::get<2>(*it++);  // advance first: StartJob erases j
    ++scanned;
    if (c.info(j).num_gpus > c.free_gpus().total_free()) continue;
    if (auto gpus = Place(c, j)) StartJob(c, j, *gpus);
  }
}

void PreemptivePolicy::Schedule(Cluster& c) {
  if (pending_.empty() || !dirty_) return;
  dirty_ = false;
  while (!pending_.empty()) {
    JobId p = std::get<2>(*pending_.begin());
    if (!StartOrPreemptFor(c, p)) break;
  }
  Backfill(c);
  // A job blocked by locality may fit after a relaxation wake-up.
  if (!pending_.empty() && opt_.locality != Locality::kBestEffort) dirty_ = true;
}

}  // namespace gandiva::sched
