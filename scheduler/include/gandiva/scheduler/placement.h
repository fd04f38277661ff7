// Gang placement over the free-GPU index: consolidated (fewest machines, best
// fit) or spread. Used by every policy; pure functions of the index.
#ifndef GANDIVA_SCHED_PLACEMENT_H_
#define GANDIVA_SCHED_PLACEMENT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "gandiva/scheduler/free_index.h"

namespace gandiva::sched {

inline constexpr uint64_t kAllGpuTypes = ~0ULL;

// Free GPUs of the types in `type_mask` (bit i = Topology GPU type i).
int FreeOfTypes(const FreeIndex& free, uint64_t type_mask);
// n GPUs on the fewest possible machines (Topology::MinMachines), best fit:
// the machine with the fewest free GPUs that still holds the gang. nullopt if
// no such placement exists right now.
std::optional<std::vector<GpuId>> FindConsolidated(const FreeIndex& free, int n,
                                                   uint64_t type_mask);
// n GPUs anywhere, taking the emptiest machines first; nullopt if too few free.
std::optional<std::vector<GpuId>> FindSpread(const FreeIndex& free, int n, uint64_t type_mask);
// The free GPUs of one machine, lowest first, at most n.
std::vector<GpuId> FreeOnMachine(const FreeIndex& free, int machine, int n);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_PLACEMENT_H_
