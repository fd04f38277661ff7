// Gang placement: best-fit single machine, whole machines for big gangs,
// emptiest-first for spread placements.
#include "gandiva/scheduler/placement.h"

#include <bit>

namespace gandiva::sched {

int FreeOfTypes(const FreeIndex& free, uint64_t mask) {
  int total = 0, types = static_cast<int>(free.topology().gpu_types().size());
  for (int t = 0; t < types; ++t)
    if ((mask >> t) & 1) total += free.free_of_type(t);
  return total;
}

std::vector<GpuId> FreeOnMachine(const FreeIndex& free, int machine, int n) {
  std::vector<GpuId> out;
  uint64_t m = free.free_mask(machine);
  GpuId first = free.topology().machines()[machine].first_gpu;
  while (m && static_cast<int>(out.size()) < n) {
    int bit = std::countr_zero(m);
    out.push_back(first + bit);
    m &= m - 1;
  }
  return out;
}

namespace {

// Takes GPUs from machines in descending free count until n are gathered;
// returns the number of machines used, or -1 if fewer than n are free.
int GatherEmptiestFirst(const FreeIndex& free, int n, uint64_t mask, std::vector<GpuId>* out) {
  int types = static_cast<int>(free.topology().gpu_types().size());
  int machines = 0;
  for (int c = free.max_count(); c >= 1 && static_cast<int>(out->size()) < n; --c) {
    // Merge across types by machine id for a deterministic order.
    for (int t = 0; t < types && static_cast<int>(out->size()) < n; ++t) {
      if (!((mask >> t) & 1)) continue;
      for (int m : free.machines_with(t, c)) {
        auto g = FreeOnMachine(free, m, n - static_cast<int>(out->size()));
        out->insert(out->end(), g.begin(), g.end());
        ++machines;
        if (static_cast<int>(out->size()) >= n) break;
      }
    }
  }
  return static_cast<int>(out->size()) >= n ? machines : -1;
}

}  // namespace

std::optional<std::vector<GpuId>> FindConsolidated(const FreeIndex& free, int n, uint64_t mask) {
  if (n <= 0 || FreeOfTypes(free, mask) < n) return std::nullopt;
  const Topology& topo = free.topology();
  int types = static_cast<int>(topo.gpu_types().size());
  if (n <= free.max_count()) {
    for (int c = n; c <= free.max_count(); ++c) {
      int best = -1;
      for (int t = 0; t < types; ++t) {
        if (!((mask >> t) & 1) || free.machines_with(t, c).empty()) continue;
        int m = *free.machines_with(t, c).begin();
        if (best < 0 || m < best) best = m;
      }
      if (best >= 0) return FreeOnMachine(free, best, n);
    }
    return std::nullopt;
  }
  std::vector<GpuId> out;
  int used = GatherEmptiestFirst(free, n, mask, &out);
  if (used < 0 || used > topo.MinMachines(n)) return std::nullopt;
  return out;
}

std::optional<std::vector<GpuId>> FindSpread(const FreeIndex& free, int n, uint64_t mask) {
  if (n <= 0 || FreeOfTypes(free, mask) < n) return std::nullopt;
  std::vector<GpuId> out;
  if (GatherEmptiestFirst(free, n, mask, &out) < 0) return std::nullopt;
  return out;
}

}  // namespace gandiva::sched
