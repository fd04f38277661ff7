// Free-GPU index: per-machine bit masks plus buckets by (GPU type, free count).
#include "gandiva/scheduler/free_index.h"

#include <algorithm>
#include <cassert>

namespace gandiva::sched {

FreeIndex::FreeIndex(const Topology& topo) : topo_(&topo) {
  const auto& ms = topo.machines();
  mask_.resize(ms.size());
  max_count_ = topo.max_gpus_per_machine();
  buckets_.assign(topo.gpu_types().size(), std::vector<IdSet>(max_count_ + 1));
  free_by_type_.assign(topo.gpu_types().size(), 0);
  for (size_t m = 0; m < ms.size(); ++m) {
    mask_[m] = ms[m].num_gpus >= 64 ? ~0ULL : ((1ULL << ms[m].num_gpus) - 1);
    buckets_[ms[m].gpu_type][ms[m].num_gpus].insert(static_cast<int>(m));
    free_by_type_[ms[m].gpu_type] += ms[m].num_gpus;
    total_free_ += ms[m].num_gpus;
  }
}

bool FreeIndex::IsFree(GpuId g) const {
  int m = topo_->machine_of(g);
  return (mask_[m] >> (g - topo_->machines()[m].first_gpu)) & 1;
}

void FreeIndex::Move(int m, uint64_t new_mask) {
  int type = topo_->machines()[m].gpu_type;
  int before = std::popcount(mask_[m]), after = std::popcount(new_mask);
  if (before != after) {
    buckets_[type][before].erase(m);
    buckets_[type][after].insert(m);
  }
  free_by_type_[type] += after - before;
  total_free_ += after - before;
  mask_[m] = new_mask;
}

// A gang's GPUs come machine by machine: each run of GPUs on one machine
// moves that machine between buckets once, not once per GPU.
void FreeIndex::Take(std::span<const GpuId> gpus) {
  for (size_t i = 0; i < gpus.size();) {
    int m = topo_->machine_of(gpus[i]);
    uint64_t bits = 0;
    for (; i < gpus.size() && topo_->machine_of(gpus[i]) == m; ++i) {
      uint64_t bit = 1ULL << (gpus[i] - topo_->machines()[m].first_gpu);
      assert(mask_[m] & bit & ~bits);
      bits |= bit;
    }
    Move(m, mask_[m] & ~bits);
  }
}

void FreeIndex::Release(std::span<const GpuId> gpus) {
  for (size_t i = 0; i < gpus.size();) {
    int m = topo_->machine_of(gpus[i]);
    uint64_t bits = 0;
    for (; i < gpus.size() && topo_->machine_of(gpus[i]) == m; ++i) {
      uint64_t bit = 1ULL << (gpus[i] - topo_->machines()[m].first_gpu);
      assert(!(mask_[m] & bit) && !(bits & bit));
      bits |= bit;
    }
    Move(m, mask_[m] | bits);
  }
}

}  // namespace gandiva::sched
