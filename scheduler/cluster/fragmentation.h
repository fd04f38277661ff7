// The fragmentation measure of FGD (Weng et al., "Beware of Fragmentation",
// ATC'23), in our words: the GPU capacity left on a node is fragmented for a
// task when that task could not use it there. For a task distribution it is
// the expectation over the distribution's task shapes.
#ifndef GANDIVA_SRC_SCHED_FRAGMENTATION_H_
#define GANDIVA_SRC_SCHED_FRAGMENTATION_H_

#include <vector>

#include "cluster/fractional_cluster.h"

namespace gandiva::sched {

// Milli of node n's free GPU capacity that task t could not use:
// * all of it if t does not fit on n at all (CPU, memory or GPUs short), or if
//   t asks for no GPU;
// * else, for a share of d milli, the free milli of GPUs with less than d left;
// * else (whole GPUs), the free milli of GPUs that are partly taken.
long FragmentedFor(const FractionalNode& n, const TaskShape& t);

// A task-size distribution: the shapes of GPU tasks with their popularity.
// CPU-only shapes are left out on purpose: every free GPU milli is fragmented
// for them wherever a task goes, so they would add the same amount to every
// choice of a GPU task (and nothing to a CPU task's), and only inflate the
// measure.
class TaskMix {
 public:
  void Add(const TaskShape& t, double weight = 1);
  bool empty() const { return total_weight_ == 0; }
  // Counts the Add calls, so that what is derived from the mix can be cached.
  long version() const { return version_; }
  // Expected FragmentedFor(n, t) over the distribution, in milli.
  double NodeFragmentation(const FractionalNode& n) const;

 private:
  // Shapes with the same GPU request share the GPU part of the computation;
  // only their CPU and memory decide whether they fit at all.
  struct CpuMemory {
    long cpu_milli, memory_mib;
    double weight;
  };
  struct GpuGroup {
    int num_gpu, gpu_milli;
    double weight = 0;
    std::vector<CpuMemory> shapes;
  };
  std::vector<GpuGroup> groups_;
  double total_weight_ = 0;
  long version_ = 0;
};

}  // namespace gandiva::sched

#endif  // GANDIVA_SRC_SCHED_FRAGMENTATION_H_
