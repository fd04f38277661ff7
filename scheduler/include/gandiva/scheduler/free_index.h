// Which GPUs are free, bucketed by machine and free count so that gang
// placement (best fit, fewest machines) is a few set lookups, not a scan.
#ifndef GANDIVA_SCHED_FREE_INDEX_H_
#define GANDIVA_SCHED_FREE_INDEX_H_

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "gandiva/scheduler/id_set.h"
#include "gandiva/scheduler/topology.h"

namespace gandiva::sched {

// Invariant: a machine is in exactly one bucket, buckets_[type][free count].
// Machines hold at most 64 GPUs (a bit mask per machine).
class FreeIndex {
 public:
  explicit FreeIndex(const Topology& topo);

  void Take(std::span<const GpuId> gpus);     // each must be free
  void Release(std::span<const GpuId> gpus);  // each must be taken
  bool IsFree(GpuId g) const;

  int total_free() const { return total_free_; }
  int free_of_type(int type) const { return free_by_type_[type]; }
  int free_on(int machine) const { return std::popcount(mask_[machine]); }
  uint64_t free_mask(int machine) const { return mask_[machine]; }
  // Machines of `type` with exactly `count` free GPUs, in id order.
  const IdSet& machines_with(int type, int count) const { return buckets_[type][count]; }
  int max_count() const { return max_count_; }
  const Topology& topology() const { return *topo_; }

 private:
  void Move(int machine, uint64_t new_mask);

  const Topology* topo_;
  std::vector<uint64_t> mask_;
  std::vector<std::vector<IdSet>> buckets_;
  std::vector<int> free_by_type_;
  int total_free_ = 0;
  int max_count_ = 0;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_FREE_INDEX_H_
