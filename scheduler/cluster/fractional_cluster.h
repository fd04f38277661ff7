// The fractional-GPU cluster of the fragmentation experiment: nodes with CPU,
// memory and GPUs of 1000 milli-units each, and tasks that ask for a share of
// one GPU or for whole GPUs on one node. Placement only: nothing finishes.
#ifndef GANDIVA_SRC_SCHED_FRACTIONAL_CLUSTER_H_
#define GANDIVA_SRC_SCHED_FRACTIONAL_CLUSTER_H_

#include <vector>

namespace gandiva::sched {

inline constexpr int kGpuMilli = 1000;  // one whole GPU

// What a task asks for. A share (num_gpu 1, gpu_milli < 1000) goes on one GPU
// that has that much left; k whole GPUs must be k untouched GPUs of one node.
struct TaskShape {
  int num_gpu = 0;    // 0: CPU only
  int gpu_milli = 0;  // per GPU
  long cpu_milli = 0;
  long memory_mib = 0;

  bool is_share() const { return num_gpu == 1 && gpu_milli < kGpuMilli; }
  long gpu_demand() const { return static_cast<long>(num_gpu) * gpu_milli; }
  friend bool operator==(const TaskShape&, const TaskShape&) = default;
};

struct FractionalNode {
  long cpu_free = 0, cpu_capacity = 0;
  long memory_free = 0, memory_capacity = 0;
  std::vector<int> gpu_free;  // milli left on each GPU

  long GpuFree() const;  // milli left on the whole node
  int WholeGpusFree() const;
  bool HasCpuAndMemoryFor(const TaskShape& t) const {
    return cpu_free >= t.cpu_milli && memory_free >= t.memory_mib;
  }
};

// Where a task goes: a node, and the GPUs it takes there (none for CPU only,
// one for a share, num_gpu for whole GPUs).
struct FractionalPlacement {
  int node = -1;
  std::vector<int> gpus;
};

class FractionalCluster {
 public:
  // Adds a node with `gpus` untouched GPUs; returns its index.
  int AddNode(long cpu_milli, long memory_mib, int gpus);

  const std::vector<FractionalNode>& nodes() const { return nodes_; }
  long gpu_capacity() const { return gpu_capacity_; }  // milli
  long gpu_allocated() const { return gpu_allocated_; }
  // Counts the placements on node n, so that what is derived from a node can be cached.
  long version(int n) const { return versions_[n]; }

  // Whether `t` fits on node n at all (some GPU choice exists).
  bool Fits(int n, const TaskShape& t) const;
  // The GPU choices for `t` on node n that differ in effect: for a share, one
  // GPU of each distinct amount left that holds it (lowest index first); for
  // whole GPUs, the lowest untouched ones; for CPU only, no GPUs. Empty if it
  // does not fit.
  std::vector<std::vector<int>> Choices(int n, const TaskShape& t) const;
  // Takes the resources; the placement must come from Choices.
  void Place(const FractionalPlacement& p, const TaskShape& t);

 private:
  std::vector<FractionalNode> nodes_;
  std::vector<long> versions_;
  long gpu_capacity_ = 0, gpu_allocated_ = 0;
};

// The node as it would be after placing `t` on `gpus` of it.
FractionalNode AfterPlacing(const FractionalNode& node, const std::vector<int>& gpus,
                            const TaskShape& t);

}  // namespace gandiva::sched

#endif  // GANDIVA_SRC_SCHED_FRACTIONAL_CLUSTER_H_
