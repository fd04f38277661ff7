// Constructors of the built-in policies (one file each), used by MakePolicy.
#ifndef GANDIVA_SRC_SCHED_POLICIES_H_
#define GANDIVA_SRC_SCHED_POLICIES_H_

#include <memory>

#include "policies/policy_base.h"

namespace gandiva::sched {

std::unique_ptr<Policy> MakeFifoPolicy(const PolicyOptions& o);
std::unique_ptr<Policy> MakePhillyPolicy(const PolicyOptions& o);
std::unique_ptr<Policy> MakeSrtfPolicy(const PolicyOptions& o);
std::unique_ptr<Policy> MakeLasPolicy(const PolicyOptions& o);
std::unique_ptr<Policy> MakeGandivaPolicy(const PolicyOptions& o);
std::unique_ptr<Policy> MakeReservePackPolicy(const PolicyOptions& o);
std::unique_ptr<Policy> MakeSjfPredictedPolicy(const PolicyOptions& o);
// The same SJF on a CART regression tree of log run time (TreeDurationPredictor).
std::unique_ptr<Policy> MakeSjfTreePolicy(const PolicyOptions& o);

}  // namespace gandiva::sched

#endif  // GANDIVA_SRC_SCHED_POLICIES_H_
