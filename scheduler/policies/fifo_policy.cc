// FIFO with gang scheduling and head-of-line blocking; "philly" is the same
// queue with Philly's locality relaxation (wait for a packed placement, then
// accept a spread one after a delay).
#include <deque>

#include "policies/policies.h"

namespace gandiva::sched {
namespace {

class FifoPolicy : public PolicyBase {
 public:
  FifoPolicy(PolicyOptions o, const char* name) : PolicyBase(std::move(o)), name_(name) {}
  const char* name() const override { return name_; }
  void OnArrival(Cluster&, JobId j) override { queue_.push_back(j); }
  // A job may end while it waits (cancelled, or refused by the live cluster's
  // node): it leaves the queue, or it would block the head forever.
  void OnFinish(Cluster&, JobId j) override { std::erase(queue_, j); }
  void Schedule(Cluster& c) override {
    while (!queue_.empty()) {
      JobId j = queue_.front();
      auto gpus = Place(c, j);
      if (!gpus) break;  // head-of-line: nobody overtakes the head
      if (!c.Start(j, *gpus).ok()) break;
      queue_.pop_front();
    }
  }

 private:
  const char* name_;
  std::deque<JobId> queue_;
};

}  // namespace

std::unique_ptr<Policy> MakeFifoPolicy(const PolicyOptions& o) {
  return std::make_unique<FifoPolicy>(o, "fifo");
}

std::unique_ptr<Policy> MakePhillyPolicy(const PolicyOptions& o) {
  PolicyOptions p = o;
  if (p.locality == Locality::kBestEffort) p.locality = Locality::kRelaxed;
  return std::make_unique<FifoPolicy>(p, "philly");
}

}  // namespace gandiva::sched
