// Gandiva's introspective policy: FIFO placement; when oversubscribed,
// time-slice a job with a same-size job; every interval, try packing sliced
// pairs and keep a pack only if the pair's measured progress beats slicing;
// migrate to de-share and to restore locality; grow jobs onto idle GPUs and
// keep the growth only if it measurably helps; shrink under pressure.
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "policies/policies.h"

namespace gandiva::sched {
namespace {

class GandivaPolicy : public PolicyBase {
 public:
  using PolicyBase::PolicyBase;
  const char* name() const override { return "gandiva"; }

  void OnArrival(Cluster&, JobId j) override { queue_.push_back(j); }
  void OnFinish(Cluster& c, JobId j) override {
    share_.OnLeft(c, j);
    spread_.erase(j);
    grown_.erase(j);
  }

  void Schedule(Cluster& c) override {
    PlacePending(c);
    if (c.Now() >= next_introspect_) {
      Introspect(c);
      next_introspect_ = c.Now() + opt_.gandiva_interval;
    }
    if (NeedsIntrospection(c)) c.WakeAt(next_introspect_);
  }

 private:
  struct PackTrial {
    JobId a, b;
    double since;
    double slice_sum;  // the pair's summed rate while taking turns
    bool decided;
  };
  struct Grow {
    std::vector<GpuId> original;
    double since;
    double rate_before;
    bool decided;
  };

  static bool IsSpread(const Cluster& c, std::span<const GpuId> gpus) {
    int machines = 0, last = -1;
    for (GpuId g : gpus) {  // sorted, so a machine's GPUs are adjacent
      int m = c.topology().machine_of(g);
      if (m != last) ++machines, last = m;
    }
    return machines > c.topology().MinMachines(static_cast<int>(gpus.size()));
  }

  void PlacePending(Cluster& c) {
    bool shrunk = false;
    while (!queue_.empty()) {
      JobId j = queue_.front();
      int n = c.info(j).num_gpus;
      auto gpus = Place(c, j);
      if (!gpus && !grown_.empty() && !shrunk) {
        ShrinkAll(c);  // grown jobs give back their extra GPUs under pressure
        shrunk = true;
        gpus = Place(c, j);
      }
      if (gpus) {
        if (!c.Start(j, *gpus).ok()) break;
        share_.OnPlaced(c, j);
        if (IsSpread(c, c.gpus(j))) spread_.insert(j);
        queue_.pop_front();
        continue;
      }
      // Oversubscribed: take turns with a running job of the same size.
      int g = share_.FindJoinable(c, n, opt_.gandiva_max_share, JobMask(c, j, kAllGpuTypes),
                                  [&](int g) {
                                    GroupView v = c.group(g);
                                    return !(v.members.size() == 1 && grown_.count(v.members[0])) &&
                                           !(v.mode == ShareMode::kPack && v.members.size() >= 2);
                                  });
      if (g < 0) break;
      std::vector<GpuId> target(c.group(g).gpus.begin(), c.group(g).gpus.end());
      if (c.group(g).mode == ShareMode::kPack && !c.SetShareMode(g, ShareMode::kSlice).ok()) break;
      if (!c.Start(j, target).ok()) break;
      ++stats_.time_slices;
      share_.OnPlaced(c, j);
      review_ = true;
      queue_.pop_front();
    }
  }

  bool NeedsIntrospection(const Cluster& c) const {
    if (review_) return true;
    for (const auto& [g, t] : trials_)
      if (!t.decided) return true;
    for (const auto& [j, gr] : grown_)
      if (!gr.decided) return true;
    return c.free_gpus().total_free() > 0 && queue_.empty() &&
           (!share_.shared().empty() || !spread_.empty());
  }

  static std::tuple<int, int, int> PairKey(const Cluster& c, JobId a, JobId b) {
    int ta = c.info(a).job_type, tb = c.info(b).job_type;
    return {std::min(ta, tb), std::max(ta, tb), c.info(a).num_gpus};
  }

  void Introspect(Cluster& c) {
    review_ = false;
    if (queue_.empty() && opt_.gandiva_migrate) {
      Deshare(c);
      RestoreLocality(c);
    }
    ReviewPacking(c);
    ReviewGrowth(c);
    if (queue_.empty() && opt_.gandiva_grow) GrowIdle(c);
  }

  // Free GPUs and sharing at once: move a sharer out (rates add up to more alone).
  void Deshare(Cluster& c) {
    std::vector<int> shared(share_.shared().begin(), share_.shared().end());
    for (int g : shared) {
      GroupView v = c.group(g);
      if (v.members.size() < 2) continue;
      JobId j = v.members.back();
      auto gpus = FindConsolidated(c.free_gpus(), c.info(j).num_gpus, JobMask(c, j, kAllGpuTypes));
      if (!gpus) continue;
      if (c.Migrate(j, *gpus).ok()) share_.OnPlaced(c, j);
    }
  }

  void RestoreLocality(Cluster& c) {
    std::vector<JobId> spread(spread_.begin(), spread_.end());
    for (JobId j : spread) {
      if (c.state(j) != JobState::kRunning || c.group(c.group_of(j)).members.size() != 1) continue;
      auto gpus = FindConsolidated(c.free_gpus(), c.info(j).num_gpus, JobMask(c, j, kAllGpuTypes));
      if (!gpus) continue;
      if (c.Migrate(j, *gpus).ok()) {
        share_.OnPlaced(c, j);
        spread_.erase(j);
      }
    }
  }

  double PairRate(const Cluster& c, JobId a, JobId b) const {
    return c.MeasuredRate(a) + c.MeasuredRate(b);
  }

  void ReviewPacking(Cluster& c) {
    // Forget trials whose pair broke up.
    for (auto it = trials_.begin(); it != trials_.end();) {
      GroupView v = c.group(it->first);
      bool same = v.members.size() == 2 &&
                  ((v.members[0] == it->second.a && v.members[1] == it->second.b) ||
                   (v.members[0] == it->second.b && v.members[1] == it->second.a));
      it = same ? std::next(it) : trials_.erase(it);
    }
    std::vector<int> shared(share_.shared().begin(), share_.shared().end());
    for (int g : shared) {
      GroupView v = c.group(g);
      if (v.members.size() != 2) continue;
      JobId a = v.members[0], b = v.members[1];
      auto key = PairKey(c, a, b);
      auto trial = trials_.find(g);
      if (v.mode == ShareMode::kPack) {
        if (trial == trials_.end()) continue;
        PackTrial& t = trial->second;
        if (!t.decided && c.Now() - t.since < opt_.gandiva_interval) continue;
        double packed = PairRate(c, a, b);
        if (packed >= opt_.pack_gain * t.slice_sum) {
          t.decided = true;
          learned_[key] = true;
        } else {  // interference: taking turns is better
          if (c.SetShareMode(g, ShareMode::kSlice).ok()) ++stats_.unpacks;
          learned_[key] = false;
          trials_.erase(trial);
        }
        continue;
      }
      if (!c.PairFitsMemory(a, b)) continue;
      auto known = learned_.find(key);
      if (known != learned_.end() && !known->second) continue;
      double slice_sum = PairRate(c, a, b);
      if (slice_sum <= 0) {  // a member is stalled: measure next round
        review_ = true;
        continue;
      }
      if (!c.SetShareMode(g, ShareMode::kPack).ok()) continue;
      ++stats_.packs;
      trials_[g] = {a, b, c.Now(), slice_sum, known != learned_.end()};
    }
  }

  void ReviewGrowth(Cluster& c) {
    std::vector<JobId> done;
    for (auto& [j, gr] : grown_) {
      if (gr.decided || c.Now() - gr.since < opt_.gandiva_interval) continue;
      double gain = gr.rate_before > 0 ? c.MeasuredRate(j) / gr.rate_before : 0;
      auto key = std::make_pair(c.info(j).job_type, c.info(j).num_gpus);
      if (gain >= opt_.grow_gain) {
        gr.decided = true;
        grow_learned_[key] = true;
      } else {
        grow_learned_[key] = false;
        done.push_back(j);
      }
    }
    for (JobId j : done) Shrink(c, j);
  }

  void GrowIdle(Cluster& c) {
    const int total = c.topology().num_gpus();
    for (int n : {1, 2, 4}) {
      std::vector<int> groups;
      for (int g : share_.groups(n, 1)) {
        if (groups.size() >= 64) break;  // bounded work per round
        groups.push_back(g);
      }
      for (int g : groups) {
        if (c.free_gpus().total_free() * 10 < total) return;  // keep 10% idle for arrivals
        JobId j = c.group(g).members[0];
        if (grown_.count(j) || spread_.count(j) || c.MeasuredRate(j) <= 0) continue;
        auto known = grow_learned_.find({c.info(j).job_type, n});
        if (known != grow_learned_.end() && !known->second) continue;
        int m = c.topology().machine_of(c.gpus(j)[0]);
        if (c.free_gpus().free_on(m) < n) continue;
        std::vector<GpuId> original(c.gpus(j).begin(), c.gpus(j).end());
        std::vector<GpuId> bigger = original;
        auto extra = FreeOnMachine(c.free_gpus(), m, n);
        bigger.insert(bigger.end(), extra.begin(), extra.end());
        double before = c.MeasuredRate(j);
        if (!c.Resize(j, bigger).ok()) continue;
        ++stats_.grows;
        share_.OnPlaced(c, j);
        grown_[j] = {original, c.Now(), before, known != grow_learned_.end()};
      }
    }
  }

  void Shrink(Cluster& c, JobId j) {
    auto it = grown_.find(j);
    if (it == grown_.end()) return;
    if (c.state(j) == JobState::kRunning && c.Resize(j, it->second.original).ok()) {
      ++stats_.shrinks;
      share_.OnPlaced(c, j);
    }
    grown_.erase(it);
  }

  void ShrinkAll(Cluster& c) {
    std::vector<JobId> all;
    for (const auto& [j, gr] : grown_) all.push_back(j);
    for (JobId j : all) Shrink(c, j);
  }

  std::deque<JobId> queue_;
  ShareIndex share_;
  std::set<JobId> spread_;
  std::map<JobId, Grow> grown_;
  std::map<int, PackTrial> trials_;
  std::map<std::tuple<int, int, int>, bool> learned_;  // pair of types -> packing pays
  std::map<std::pair<int, int>, bool> grow_learned_;   // (type, GPUs) -> growing pays
  double next_introspect_ = 0;
  bool review_ = false;
};

}  // namespace

std::unique_ptr<Policy> MakeGandivaPolicy(const PolicyOptions& o) {
  return std::make_unique<GandivaPolicy>(o);
}

}  // namespace gandiva::sched
