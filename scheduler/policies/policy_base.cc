// Locality-aware placement and the share index used by the sharing policies.
#include "policies/policy_base.h"

namespace gandiva::sched {

uint64_t PolicyBase::JobMask(const Cluster& c, JobId j, uint64_t mask) {
  int t = c.info(j).gpu_type;
  return t >= 0 ? mask & (1ULL << t) : mask;
}

Preemption PreemptionFor(const Cluster& c, JobId victim, JobId taker) {
  if (taker < 0 || !c.info(victim).restartable || c.PairFitsMemory(victim, taker))
    return Preemption::kPark;
  return Preemption::kStop;
}

std::optional<std::vector<GpuId>> PolicyBase::Place(Cluster& c, JobId j, uint64_t type_mask) {
  const FreeIndex& free = c.free_gpus();
  int n = c.info(j).num_gpus;
  uint64_t mask = JobMask(c, j, type_mask);
  if (free.total_free() < n || FreeOfTypes(free, mask) < n) return std::nullopt;
  if (auto p = FindConsolidated(free, n, mask)) return p;
  switch (opt_.locality) {
    case Locality::kBestEffort:
      return FindSpread(free, n, mask);
    case Locality::kStrict:
      return std::nullopt;
    case Locality::kRelaxed: {
      double allowed_at = c.PendingSince(j) + opt_.locality_delay;
      if (c.Now() >= allowed_at) return FindSpread(free, n, mask);
      c.WakeAt(allowed_at);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void ShareIndex::Reindex(const Cluster& c, int g) {
  if (g < 0) return;
  if (static_cast<size_t>(g) >= key_.size()) key_.resize(g + 1, {0, 0});
  auto [size, k] = key_[g];
  if (k > 0) by_size_[size][k].erase(g);
  shared_.erase(g);
  GroupView v = c.group(g);
  int members = static_cast<int>(v.members.size());
  if (members == 0) {
    key_[g] = {0, 0};
    return;
  }
  size = static_cast<int>(v.gpus.size());
  if (static_cast<size_t>(size) >= by_size_.size()) by_size_.resize(size + 1);
  if (static_cast<size_t>(members) >= by_size_[size].size()) by_size_[size].resize(members + 1);
  by_size_[size][members].insert(g);
  key_[g] = {size, members};
  if (members >= 2) shared_.insert(g);
}

void ShareIndex::OnPlaced(const Cluster& c, JobId j) {
  EnsureSize(job_group_, j, kNoGroup);
  int old = job_group_[j];
  job_group_[j] = c.group_of(j);
  if (old != kNoGroup && old != job_group_[j]) Reindex(c, old);
  Reindex(c, job_group_[j]);
}

void ShareIndex::OnLeft(const Cluster& c, JobId j) {
  EnsureSize(job_group_, j, kNoGroup);
  int old = job_group_[j];
  job_group_[j] = kNoGroup;
  Reindex(c, old);
}

}  // namespace gandiva::sched
