// Where a task goes on the fractional-GPU cluster: first-fit, best-fit, and
// FGD (fragmentation gradient descent: the choice that grows the expected
// fragmentation of the cluster least).
#ifndef GANDIVA_SRC_SCHED_FRACTIONAL_PLACEMENT_H_
#define GANDIVA_SRC_SCHED_FRACTIONAL_PLACEMENT_H_

#include <memory>
#include <optional>
#include <string>

#include "cluster/fractional_cluster.h"
#include "cluster/fragmentation.h"
#include "gandiva/status.h"

namespace gandiva::sched {

enum class FractionalPolicy {
  kFirstFit,  // the first node in list order that holds the task, its lowest GPUs
  kBestFit,   // the node left with the least CPU + memory + GPU (as shares of its
              // capacity), and on it the GPU left with the least
  kFgd,       // the node and GPU whose fragmentation (for a task mix) grows least
};

StatusOr<FractionalPolicy> ParseFractionalPolicy(const std::string& name);
const char* FractionalPolicyName(FractionalPolicy p);

class FractionalPlacer {
 public:
  virtual ~FractionalPlacer() = default;
  // Where t goes on c now, or nullopt if no node holds it. Does not place it.
  virtual std::optional<FractionalPlacement> Choose(const FractionalCluster& c,
                                                    const TaskShape& t) = 0;
};

// `mix` is what FGD measures fragmentation against (unused by the others); it
// must outlive the placer.
std::unique_ptr<FractionalPlacer> MakeFractionalPlacer(FractionalPolicy p, const TaskMix& mix);

}  // namespace gandiva::sched

#endif  // GANDIVA_SRC_SCHED_FRACTIONAL_PLACEMENT_H_
