// SRTF with true remaining times (an oracle baseline only a simulator can run).
#include <cmath>

#include "policies/policies.h"
#include "policies/preemptive_policy.h"

namespace gandiva::sched {
namespace {

class SrtfPolicy : public PreemptivePolicy {
 public:
  using PreemptivePolicy::PreemptivePolicy;
  const char* name() const override { return "srtf"; }

 protected:
  Key PriorityKey(Cluster& c, JobId j) override { return {0, c.OracleRemaining(j).value_or(0), j}; }
  // Remaining time shrinks while a job runs; "when it would finish at full
  // speed" orders running jobs the same way and does not drift.
  Key RunningKey(Cluster& c, JobId j) override {
    return {0, c.Now() + c.OracleRemaining(j).value_or(0), j};
  }
};

}  // namespace

std::unique_ptr<Policy> MakeSrtfPolicy(const PolicyOptions& o) {
  return std::make_unique<SrtfPolicy>(o);
}

}  // namespace gandiva::sched
