// Alibaba PAI reserve-and-pack: high-end GPUs are kept for jobs that need
// them (big gangs, or an explicit high-end type); small jobs go to the other
// GPUs and, when those are full, are packed two to a GPU if they fit in memory
// (PAI packs by declared memory, without measuring interference).
#include <deque>

#include "policies/policies.h"

namespace gandiva::sched {
namespace {

class ReservePackPolicy : public PolicyBase {
 public:
  using PolicyBase::PolicyBase;
  const char* name() const override { return "reserve-pack"; }

  void OnArrival(Cluster& c, JobId j) override {
    if (high_mask_ == 0 && low_mask_ == 0) InitMasks(c);
    int t = c.info(j).gpu_type;
    bool wants_high = c.info(j).num_gpus >= opt_.reserve_min_gpus ||
                      (t >= 0 && c.topology().gpu_types()[t].high_end);
    (wants_high ? large_ : small_).push_back(j);
  }
  void OnFinish(Cluster& c, JobId j) override { share_.OnLeft(c, j); }

  void Schedule(Cluster& c) override {
    while (!large_.empty()) {  // high-end first, anything if they are full
      JobId j = large_.front();
      auto gpus = Place(c, j, high_mask_ ? high_mask_ : kAllGpuTypes);
      if (!gpus && high_mask_) gpus = Place(c, j, kAllGpuTypes);
      if (!gpus || !Start(c, j, *gpus)) break;
      large_.pop_front();
    }
    while (!small_.empty()) {
      JobId j = small_.front();
      if (!PlaceSmall(c, j)) break;
      small_.pop_front();
    }
  }

 private:
  void InitMasks(const Cluster& c) {
    const auto& types = c.topology().gpu_types();
    for (size_t t = 0; t < types.size(); ++t)
      (types[t].high_end ? high_mask_ : low_mask_) |= 1ULL << t;
    if (high_mask_ == 0) low_mask_ = kAllGpuTypes;  // one tier: nothing to reserve
    for (const auto& m : c.topology().machines())
      if ((high_mask_ >> m.gpu_type) & 1) high_total_ += m.num_gpus;
  }

  bool Start(Cluster& c, JobId j, const std::vector<GpuId>& gpus) {
    if (!c.Start(j, gpus).ok()) return false;
    share_.OnPlaced(c, j);
    return true;
  }

  bool PlaceSmall(Cluster& c, JobId j) {
    if (auto gpus = Place(c, j, low_mask_)) return Start(c, j, *gpus);
    // Overflow onto high-end GPUs only while plenty of them are idle and no
    // big job is waiting for them.
    const FreeIndex& free = c.free_gpus();
    if (high_mask_ && large_.empty() && FreeOfTypes(free, high_mask_) * 4 > high_total_)
      if (auto gpus = Place(c, j, high_mask_)) return Start(c, j, *gpus);
    // Pack onto a low-end GPU set held by one job of the same size.
    int n = c.info(j).num_gpus;
    int g = share_.FindJoinable(c, n, 2, JobMask(c, j, low_mask_),
                                [&](int g) { return c.PairFitsMemory(j, c.group(g).members[0]); });
    if (g >= 0) {
      std::vector<GpuId> gpus(c.group(g).gpus.begin(), c.group(g).gpus.end());
      if (!c.SetShareMode(g, ShareMode::kPack).ok() || !Start(c, j, gpus)) return false;
      ++stats_.packs;
      return true;
    }
    if (high_mask_ && large_.empty())
      if (auto gpus = Place(c, j, high_mask_)) return Start(c, j, *gpus);
    return false;
  }

  uint64_t high_mask_ = 0, low_mask_ = 0;
  int high_total_ = 0;
  std::deque<JobId> large_, small_;
  ShareIndex share_;
};

}  // namespace

std::unique_ptr<Policy> MakeReservePackPolicy(const PolicyOptions& o) {
  return std::make_unique<ReservePackPolicy>(o);
}

}  // namespace gandiva::sched
