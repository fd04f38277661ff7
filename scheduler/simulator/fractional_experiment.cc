// The fragmentation experiment: build the workload (trace order or seeded
// shuffles, inflated if asked), place it task by task under each policy,
// measure the cluster at the first failure and at the end.
#include "gandiva/scheduler/fractional_experiment.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "cluster/alibaba_trace.h"
#include "cluster/fractional_cluster.h"
#include "cluster/fractional_placement.h"
#include "cluster/fragmentation.h"

namespace gandiva::sched {
namespace {

TaskShape ShapeOf(const AlibabaTask& t) {
  return {t.num_gpu, t.gpu_milli, t.cpu_milli, t.memory_mib};
}

FractionalCluster ClusterOf(const std::vector<AlibabaNode>& nodes) {
  FractionalCluster c;
  for (const auto& n : nodes) c.AddNode(n.cpu_milli, n.memory_mib, n.gpus);
  return c;
}

// The trace's tasks in creation order (stable, so equal times keep file order).
std::vector<TaskShape> TraceOrder(const std::vector<AlibabaTask>& tasks) {
  std::vector<size_t> idx(tasks.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return tasks[a].creation_time < tasks[b].creation_time;
  });
  std::vector<TaskShape> out;
  for (size_t i : idx) out.push_back(ShapeOf(tasks[i]));
  return out;
}

// Shuffled passes over the trace until the GPU demand reaches inflate x the
// trace's; whole passes while they fit, the last one cut at the target. The
// shuffle is our own Fisher-Yates on mt19937_64 (std::shuffle's algorithm is
// the library's choice), so a seed gives the same order everywhere.
std::vector<TaskShape> ShuffledOrder(const std::vector<AlibabaTask>& tasks, int seed,
                                     double inflate, long trace_demand) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  const double target = inflate * static_cast<double>(trace_demand);
  std::vector<TaskShape> out;
  long demand = 0;
  for (int pass = 0; static_cast<double>(demand) < target || pass < 1; ++pass) {
    std::vector<size_t> idx(tasks.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    for (size_t i = idx.size(); i > 1; --i) std::swap(idx[i - 1], idx[rng() % i]);
    const bool whole_pass = pass + 1 <= inflate;
    for (size_t i : idx) {
      if (!whole_pass && static_cast<double>(demand) >= target) break;
      out.push_back(ShapeOf(tasks[i]));
      demand += out.back().gpu_demand();
    }
    if (trace_demand == 0) break;
  }
  return out;
}

double FragmentedMilli(const FractionalCluster& c, const TaskMix& mix) {
  double sum = 0;
  for (const auto& n : c.nodes()) sum += mix.NodeFragmentation(n);
  return sum;
}

// Places `workload` in order under one policy.
FractionalRun RunOne(FractionalPolicy policy, const std::vector<TaskShape>& workload,
                     const std::vector<AlibabaNode>& nodes, const TaskMix& trace_mix,
                     bool mix_seen) {
  const auto start = std::chrono::steady_clock::now();
  FractionalCluster cluster = ClusterOf(nodes);
  TaskMix seen;
  auto placer = MakeFractionalPlacer(policy, mix_seen ? seen : trace_mix);
  const double capacity = static_cast<double>(cluster.gpu_capacity());
  FractionalRun run;
  run.policy = FractionalPolicyName(policy);
  run.tasks = static_cast<long>(workload.size());
  long arrived = 0, unplaced = 0;
  for (size_t i = 0; i < workload.size(); ++i) {
    const TaskShape& t = workload[i];
    if (mix_seen) seen.Add(t);
    auto where = placer->Choose(cluster, t);
    if (!where) {
      if (run.failed++ == 0) {
        run.first_failure = static_cast<long>(i);
        run.arrived_at_first_failure = static_cast<double>(arrived) / capacity;
        run.allocated_at_first_failure = static_cast<double>(cluster.gpu_allocated()) / capacity;
        run.fragmented_gpus_at_first_failure = FragmentedMilli(cluster, trace_mix) / kGpuMilli;
        run.first_failed_num_gpu = t.num_gpu;
        run.first_failed_gpu_milli = t.gpu_milli;
      }
      unplaced += t.gpu_demand();
    } else {
      cluster.Place(*where, t);
      ++run.placed;
    }
    arrived += t.gpu_demand();
  }
  run.unplaced_demand = arrived > 0 ? static_cast<double>(unplaced) / double(arrived) : 0;
  run.allocated_at_end = static_cast<double>(cluster.gpu_allocated()) / capacity;
  run.unallocated_gpus =
      static_cast<double>(cluster.gpu_capacity() - cluster.gpu_allocated()) / kGpuMilli;
  run.fragmented_gpus = FragmentedMilli(cluster, trace_mix) / kGpuMilli;
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

Status CheckOptions(const FractionalOptions& o, std::vector<FractionalPolicy>* policies) {
  if (o.policies.empty()) return InvalidArgument("no placement policy given");
  for (const auto& p : o.policies) {
    GD_ASSIGN_OR_RETURN(FractionalPolicy parsed, ParseFractionalPolicy(p));
    policies->push_back(parsed);
  }
  if (o.order != "random" && o.order != "trace")
    return InvalidArgument("order must be 'random' or 'trace', got '" + o.order + "'");
  if (o.mix != "trace" && o.mix != "seen")
    return InvalidArgument("mix must be 'trace' or 'seen', got '" + o.mix + "'");
  if (!(o.inflate >= 1) || o.inflate > 100) return InvalidArgument("inflate must be in [1, 100]");
  if (o.order == "trace" && o.inflate != 1)
    return InvalidArgument("inflate needs the random order (the trace order has one pass)");
  if (o.order == "random" && o.seeds.empty()) return InvalidArgument("no seeds given");
  if (o.threads < 1) return InvalidArgument("threads must be at least 1");
  return Status::Ok();
}

}  // namespace

StatusOr<FractionalReport> RunFractionalExperiment(const FractionalOptions& o) {
  std::vector<FractionalPolicy> policies;
  GD_RETURN_IF_ERROR(CheckOptions(o, &policies));
  GD_ASSIGN_OR_RETURN(std::vector<AlibabaTask> tasks, ReadAlibabaTasks(o.tasks_path));
  GD_ASSIGN_OR_RETURN(std::vector<AlibabaNode> nodes, ReadAlibabaNodes(o.nodes_path));

  FractionalReport report;
  report.tasks_path = o.tasks_path;
  report.nodes_path = o.nodes_path;
  report.order = o.order;
  report.mix = o.mix;
  report.inflate = o.inflate;
  report.nodes = static_cast<int>(nodes.size());
  report.trace_tasks = static_cast<int>(tasks.size());
  TaskMix trace_mix;
  long trace_demand = 0;
  for (const auto& t : tasks) {
    trace_mix.Add(ShapeOf(t));
    trace_demand += ShapeOf(t).gpu_demand();
  }
  report.trace_demand_gpus = static_cast<double>(trace_demand) / kGpuMilli;
  report.capacity_gpus = static_cast<double>(ClusterOf(nodes).gpu_capacity()) / kGpuMilli;

  // One workload per seed (or the trace order), shared by every policy.
  std::vector<int> seeds = o.order == "trace" ? std::vector<int>{-1} : o.seeds;
  std::vector<std::vector<TaskShape>> workloads;
  for (int seed : seeds)
    workloads.push_back(seed < 0 ? TraceOrder(tasks)
                                 : ShuffledOrder(tasks, seed, o.inflate, trace_demand));

  // Runs are independent and deterministic: run them side by side.
  const size_t total = policies.size() * seeds.size();
  report.runs.resize(total);
  std::mutex mu;
  size_t next = 0;
  auto worker = [&] {
    for (;;) {
      size_t k;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= total) return;
        k = next++;
      }
      const size_t p = k / seeds.size(), s = k % seeds.size();
      report.runs[k] = RunOne(policies[p], workloads[s], nodes, trace_mix, o.mix == "seen");
      report.runs[k].seed = seeds[s];
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < std::min<int>(o.threads, static_cast<int>(total)); ++i)
    pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return report;
}

}  // namespace gandiva::sched
