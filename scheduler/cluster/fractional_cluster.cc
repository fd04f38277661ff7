// Resource accounting of the fractional-GPU cluster.
#include "cluster/fractional_cluster.h"

#include <algorithm>
#include <numeric>

namespace gandiva::sched {

long FractionalNode::GpuFree() const {
  return std::accumulate(gpu_free.begin(), gpu_free.end(), 0L);
}

int FractionalNode::WholeGpusFree() const {
  return static_cast<int>(std::count(gpu_free.begin(), gpu_free.end(), kGpuMilli));
}

int FractionalCluster::AddNode(long cpu_milli, long memory_mib, int gpus) {
  FractionalNode n;
  n.cpu_free = n.cpu_capacity = cpu_milli;
  n.memory_free = n.memory_capacity = memory_mib;
  n.gpu_free.assign(gpus, kGpuMilli);
  gpu_capacity_ += static_cast<long>(gpus) * kGpuMilli;
  nodes_.push_back(std::move(n));
  versions_.push_back(0);
  return static_cast<int>(nodes_.size()) - 1;
}

bool FractionalCluster::Fits(int n, const TaskShape& t) const {
  const FractionalNode& node = nodes_[n];
  if (!node.HasCpuAndMemoryFor(t)) return false;
  if (t.num_gpu == 0) return true;
  if (t.is_share())
    return std::any_of(node.gpu_free.begin(), node.gpu_free.end(),
                       [&](int free) { return free >= t.gpu_milli; });
  return node.WholeGpusFree() >= t.num_gpu;
}

std::vector<std::vector<int>> FractionalCluster::Choices(int n, const TaskShape& t) const {
  std::vector<std::vector<int>> out;
  if (!Fits(n, t)) return out;
  const FractionalNode& node = nodes_[n];
  if (t.num_gpu == 0) {
    out.emplace_back();
  } else if (t.is_share()) {
    // GPUs with the same amount left are interchangeable: one choice per amount.
    std::vector<int> seen;
    for (int g = 0; g < static_cast<int>(node.gpu_free.size()); ++g) {
      const int free = node.gpu_free[g];
      if (free < t.gpu_milli || std::find(seen.begin(), seen.end(), free) != seen.end()) continue;
      seen.push_back(free);
      out.push_back({g});
    }
  } else {
    std::vector<int> gpus;
    for (int g = 0; g < static_cast<int>(node.gpu_free.size()) && gpus.size() < size_t(t.num_gpu);
         ++g)
      if (node.gpu_free[g] == kGpuMilli) gpus.push_back(g);
    out.push_back(std::move(gpus));
  }
  return out;
}

FractionalNode AfterPlacing(const FractionalNode& node, const std::vector<int>& gpus,
                            const TaskShape& t) {
  FractionalNode after = node;
  after.cpu_free -= t.cpu_milli;
  after.memory_free -= t.memory_mib;
  for (int g : gpus) after.gpu_free[g] -= t.gpu_milli;
  return after;
}

void FractionalCluster::Place(const FractionalPlacement& p, const TaskShape& t) {
  nodes_[p.node] = AfterPlacing(nodes_[p.node], p.gpus, t);
  ++versions_[p.node];
  gpu_allocated_ += static_cast<long>(p.gpus.size()) * t.gpu_milli;
}

}  // namespace gandiva::sched
