// First-fit, best-fit and FGD over the fractional-GPU cluster.
#include "cluster/fractional_placement.h"

#include <limits>

namespace gandiva::sched {
namespace {

// How full node n would be left by a choice: the sum of what is left of its
// CPU, memory and GPU as shares of its capacity (lower is tighter).
double LeftOver(const FractionalNode& after, long gpu_capacity) {
  double left = 0;
  if (after.cpu_capacity > 0) left += double(after.cpu_free) / double(after.cpu_capacity);
  if (after.memory_capacity > 0) left += double(after.memory_free) / double(after.memory_capacity);
  if (gpu_capacity > 0) left += double(after.GpuFree()) / double(gpu_capacity);
  return left;
}

// For a share, what its GPU keeps after it (prefer the fuller GPU); 0 otherwise.
int GpuLeftOver(const FractionalNode& node, const std::vector<int>& gpus, const TaskShape& t) {
  return t.is_share() ? node.gpu_free[gpus[0]] - t.gpu_milli : 0;
}

class FirstFit : public FractionalPlacer {
 public:
  std::optional<FractionalPlacement> Choose(const FractionalCluster& c,
                                            const TaskShape& t) override {
    for (int n = 0; n < static_cast<int>(c.nodes().size()); ++n) {
      auto choices = c.Choices(n, t);
      if (!choices.empty()) return FractionalPlacement{n, choices.front()};
    }
    return std::nullopt;
  }
};

// Scores every choice (lower wins; ties go to the lower node, then GPU) and
// keeps the best.
class ScoredPlacer : public FractionalPlacer {
 public:
  std::optional<FractionalPlacement> Choose(const FractionalCluster& c,
                                            const TaskShape& t) override {
    std::optional<FractionalPlacement> best;
    Score best_score;
    for (int n = 0; n < static_cast<int>(c.nodes().size()); ++n) {
      for (auto& gpus : c.Choices(n, t)) {
        const Score s = Evaluate(c, n, gpus, t);
        if (!best || s < best_score) {
          best = FractionalPlacement{n, std::move(gpus)};
          best_score = s;
        }
      }
    }
    return best;
  }

 protected:
  // (primary, tie-break on the node, tie-break on the GPU)
  struct Score {
    double primary = 0, node_left = 0;
    int gpu_left = 0;
    bool operator<(const Score& o) const {
      // Fragmentation sums are floating point: equal up to rounding is a tie.
      constexpr double kEps = 1e-9;
      if (primary < o.primary - kEps) return true;
      if (primary > o.primary + kEps) return false;
      if (node_left < o.node_left - kEps) return true;
      if (node_left > o.node_left + kEps) return false;
      return gpu_left < o.gpu_left;
    }
  };
  virtual Score Evaluate(const FractionalCluster& c, int n, const std::vector<int>& gpus,
                         const TaskShape& t) = 0;

  static Score BestFitScore(const FractionalNode& node, const FractionalNode& after,
                            const std::vector<int>& gpus, const TaskShape& t) {
    const long gpu_capacity = static_cast<long>(node.gpu_free.size()) * kGpuMilli;
    return {0, LeftOver(after, gpu_capacity), GpuLeftOver(node, gpus, t)};
  }
};

class BestFit : public ScoredPlacer {
 protected:
  Score Evaluate(const FractionalCluster& c, int n, const std::vector<int>& gpus,
                 const TaskShape& t) override {
    const FractionalNode& node = c.nodes()[n];
    return BestFitScore(node, AfterPlacing(node, gpus, t), gpus, t);
  }
};

// FGD: the growth of the node's expected fragmentation for the task mix; best
// fit breaks ties. A node's fragmentation before the task is cached until
// something is placed on it or the mix changes.
class Fgd : public ScoredPlacer {
 public:
  explicit Fgd(const TaskMix& mix) : mix_(mix) {}

 protected:
  Score Evaluate(const FractionalCluster& c, int n, const std::vector<int>& gpus,
                 const TaskShape& t) override {
    if (before_.size() != c.nodes().size()) before_.assign(c.nodes().size(), {-1, -1, 0});
    const FractionalNode& node = c.nodes()[n];
    if (before_[n].version != c.version(n) || before_[n].mix_version != mix_.version())
      before_[n] = {c.version(n), mix_.version(), mix_.NodeFragmentation(node)};
    const FractionalNode after = AfterPlacing(node, gpus, t);
    Score s = BestFitScore(node, after, gpus, t);
    s.primary = mix_.NodeFragmentation(after) - before_[n].fragmentation;
    return s;
  }

 private:
  struct Cached {
    long version, mix_version;
    double fragmentation;
  };
  const TaskMix& mix_;
  std::vector<Cached> before_;
};

}  // namespace

StatusOr<FractionalPolicy> ParseFractionalPolicy(const std::string& name) {
  if (name == "first-fit") return FractionalPolicy::kFirstFit;
  if (name == "best-fit") return FractionalPolicy::kBestFit;
  if (name == "fgd") return FractionalPolicy::kFgd;
  return InvalidArgument("unknown placement policy '" + name +
                         "' (expected first-fit, best-fit or fgd)");
}

const char* FractionalPolicyName(FractionalPolicy p) {
  switch (p) {
    case FractionalPolicy::kFirstFit:
      return "first-fit";
    case FractionalPolicy::kBestFit:
      return "best-fit";
    case FractionalPolicy::kFgd:
      return "fgd";
  }
  return "?";
}

std::unique_ptr<FractionalPlacer> MakeFractionalPlacer(FractionalPolicy p, const TaskMix& mix) {
  switch (p) {
    case FractionalPolicy::kFirstFit:
      return std::make_unique<FirstFit>();
    case FractionalPolicy::kBestFit:
      return std::make_unique<BestFit>();
    case FractionalPolicy::kFgd:
      return std::make_unique<Fgd>(mix);
  }
  return nullptr;
}

}  // namespace gandiva::sched
