// MakePolicy: policy names to constructors.
#include "gandiva/scheduler/policy.h"
#include "policies/policies.h"

namespace gandiva::sched {

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> kNames = {
      "fifo", "srtf", "las", "gandiva", "reserve-pack", "sjf-predicted", "sjf-tree", "philly"};
  return kNames;
}

StatusOr<std::unique_ptr<Policy>> MakePolicy(const std::string& name, const PolicyOptions& o) {
  if (name == "fifo") return MakeFifoPolicy(o);
  if (name == "philly") return MakePhillyPolicy(o);
  if (name == "srtf") return MakeSrtfPolicy(o);
  if (name == "las" || name == "tiresias") return MakeLasPolicy(o);
  if (name == "gandiva") return MakeGandivaPolicy(o);
  if (name == "reserve-pack") return MakeReservePackPolicy(o);
  if (name == "sjf-predicted") return MakeSjfPredictedPolicy(o);
  if (name == "sjf-tree") return MakeSjfTreePolicy(o);
  std::string all;
  for (const auto& n : PolicyNames()) all += (all.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown policy '" + name + "' (known: " + all + ")");
}

}  // namespace gandiva::sched
