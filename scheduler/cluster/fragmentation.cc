// FGD's fragmentation measure, per task and per task distribution.
#include "cluster/fragmentation.h"

#include <algorithm>

namespace gandiva::sched {
namespace {

// The GPU part of FragmentedFor, for a task whose CPU and memory fit: the free
// milli that a request of num_gpu x gpu_milli could not use on this node.
long GpuFragmented(const FractionalNode& n, int num_gpu, int gpu_milli, long free_total) {
  const bool share = num_gpu == 1 && gpu_milli < kGpuMilli;
  const int usable_from = share ? gpu_milli : kGpuMilli;  // a GPU with less left is of no use
  long stranded = 0;
  int usable = 0;
  for (int free : n.gpu_free) {
    if (free >= usable_from)
      ++usable;
    else
      stranded += free;
  }
  const bool fits = share ? usable >= 1 : usable >= num_gpu;
  return fits ? stranded : free_total;
}

}  // namespace

long FragmentedFor(const FractionalNode& n, const TaskShape& t) {
  const long free_total = n.GpuFree();
  if (t.num_gpu == 0 || !n.HasCpuAndMemoryFor(t)) return free_total;
  return GpuFragmented(n, t.num_gpu, t.gpu_milli, free_total);
}

void TaskMix::Add(const TaskShape& t, double weight) {
  if (t.num_gpu == 0 || weight <= 0) return;
  ++version_;
  auto g = std::find_if(groups_.begin(), groups_.end(), [&](const GpuGroup& x) {
    return x.num_gpu == t.num_gpu && x.gpu_milli == t.gpu_milli;
  });
  if (g == groups_.end()) {
    groups_.push_back({t.num_gpu, t.gpu_milli, 0, {}});
    g = groups_.end() - 1;
  }
  g->weight += weight;
  total_weight_ += weight;
  auto s = std::find_if(g->shapes.begin(), g->shapes.end(), [&](const CpuMemory& x) {
    return x.cpu_milli == t.cpu_milli && x.memory_mib == t.memory_mib;
  });
  if (s == g->shapes.end())
    g->shapes.push_back({t.cpu_milli, t.memory_mib, weight});
  else
    s->weight += weight;
}

double TaskMix::NodeFragmentation(const FractionalNode& n) const {
  if (total_weight_ == 0) return 0;
  const long free_total = n.GpuFree();
  if (free_total == 0) return 0;
  double sum = 0;
  for (const GpuGroup& g : groups_) {
    double fits = 0;  // weight of the group's shapes whose CPU and memory fit
    for (const CpuMemory& s : g.shapes)
      if (s.cpu_milli <= n.cpu_free && s.memory_mib <= n.memory_free) fits += s.weight;
    const double short_of_cpu = g.weight - fits;
    sum += short_of_cpu * static_cast<double>(free_total);
    if (fits > 0)
      sum += fits * static_cast<double>(GpuFragmented(n, g.num_gpu, g.gpu_milli, free_total));
  }
  return sum / total_weight_;
}

}  // namespace gandiva::sched
