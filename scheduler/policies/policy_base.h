// What the policies share: locality-aware placement and a job-indexed table
// that grows as jobs arrive (ids are dense).
#ifndef GANDIVA_SRC_SCHED_POLICY_BASE_H_
#define GANDIVA_SRC_SCHED_POLICY_BASE_H_

#include <optional>
#include <set>
#include <vector>

#include "gandiva/scheduler/id_set.h"
#include "gandiva/scheduler/placement.h"
#include "gandiva/scheduler/policy.h"

namespace gandiva::sched {

class PolicyBase : public Policy {
 public:
  explicit PolicyBase(PolicyOptions options) : opt_(std::move(options)) {}

 protected:
  // GPUs for pending job j under the locality option, within `type_mask` and
  // the job's own GPU-type requirement; nullopt if it must wait. Under
  // Philly-style relaxation it arms a wake-up for when spreading becomes allowed.
  std::optional<std::vector<GpuId>> Place(Cluster& c, JobId j, uint64_t type_mask = kAllGpuTypes);
  // The job's GPU-type mask (its requirement, if any, intersected with `mask`).
  static uint64_t JobMask(const Cluster& c, JobId j, uint64_t mask);

  PolicyOptions opt_;
};

// How to preempt `victim` so that `taker` (-1: no job in particular) gets its
// GPUs. Parked, so that it comes back in about a slice, when the taker fits in
// memory beside it, or there is no taker; checkpointed and stopped when the
// device is needed: the taker does not fit beside a parked job's memory, and
// the victim can restart from a checkpoint (one that cannot is parked all the
// same: a stop would lose its work).
Preemption PreemptionFor(const Cluster& c, JobId victim, JobId taker);

// Groups that a job of n GPUs could join, bucketed by (size, member count), and
// the groups that are already shared. The policy reports each start, move and
// finish; the index re-reads the group from the cluster.
class ShareIndex {
 public:
  void OnPlaced(const Cluster& c, JobId j);  // after Start/Migrate of j
  void OnLeft(const Cluster& c, JobId j);    // after j finished/was suspended/migrated away
  // The joinable group of size n with the fewest members (< max_members),
  // lowest id first, whose GPUs are in `type_mask` and for which accept(group)
  // holds; -1 if none. Scans at most `scan_limit` candidates.
  template <typename Accept>
  int FindJoinable(const Cluster& c, int n, int max_members, uint64_t type_mask, Accept accept,
                   int scan_limit = 64) const;
  const IdSet& shared() const { return shared_; }
  // Groups of `size` GPUs with exactly `members` jobs.
  const IdSet& groups(int size, int members) const {
    static const IdSet kEmpty;
    if (size >= static_cast<int>(by_size_.size()) ||
        members >= static_cast<int>(by_size_[size].size()))
      return kEmpty;
    return by_size_[size][members];
  }

 private:
  void Reindex(const Cluster& c, int g);
  std::vector<int> job_group_;
  std::vector<std::pair<int, int>> key_;     // group -> (size, members), (0,0) if absent
  std::vector<std::vector<IdSet>> by_size_;  // [size][members] -> groups
  IdSet shared_;
};

template <typename Accept>
int ShareIndex::FindJoinable(const Cluster& c, int n, int max_members, uint64_t type_mask,
                             Accept accept, int scan_limit) const {
  if (n >= static_cast<int>(by_size_.size())) return -1;
  for (int k = 1; k < max_members && k < static_cast<int>(by_size_[n].size()); ++k) {
    int scanned = 0;
    for (int g : by_size_[n][k]) {
      if (++scanned > scan_limit) break;
      GpuId first = c.group(g).gpus[0];
      if (!((type_mask >> c.topology().gpu_type_of(first)) & 1)) continue;
      if (accept(g)) return g;
    }
  }
  return -1;
}

// Grows a per-job vector to hold id j.
template <typename T>
void EnsureSize(std::vector<T>& v, JobId j, const T& fill = T()) {
  if (static_cast<size_t>(j) >= v.size()) v.resize(static_cast<size_t>(j) + 1, fill);
}

}  // namespace gandiva::sched

#endif  // GANDIVA_SRC_SCHED_POLICY_BASE_H_
