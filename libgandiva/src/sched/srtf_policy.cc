// SRTF with true remaining times (an oracle baseline only a simulator can run).
#include <algorithm>
#include <unordered_set>

#include "preemptive_policy.h"
#include "policies.h"

namespace gandiva::sched {
namespace {

class SrtfPolicy : public PreemptivePolicy {
 public:
  using PreemptivePolicy::PreemptivePolicy;
  const char* name() const override { return "srtf"; }

 protected:
  void OnActivated(Cluster&, JobId j) override { active_.push_back(j); }
  void OnDeactivated(Cluster&, JobId j) override {
    auto it = std::find(active_.begin(), active_.end(), j);
    if (it != active_.end()) {
      *it = active_.back();
      active_.pop_back();
    }
  }
  void Order(Cluster& c, std::vector<JobId>* out) override {
    keyed_.clear();
    for (JobId j : active_) keyed_.push_back({c.OracleRemaining(j).value_or(0), j});
    std::sort(keyed_.begin(), keyed_.end());  // ties: lower id = earlier submit
    out->clear();
    for (auto& [r, j] : keyed_) out->push_back(j);
  }

 private:
  std::vector<JobId> active_;
  std::vector<std::pair<double, JobId>> keyed_;
};

}  // namespace

std::unique_ptr<Policy> MakeSrtfPolicy(const PolicyOptions& o) { return std::make_unique<SrtfPolicy>(o); }

}  // namespace gandiva::sched
