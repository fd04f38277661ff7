// The fragmentation experiment of FGD (Weng et al., ATC'23) on the Alibaba 2023
// GPU-sharing trace: tasks arrive one after another and are placed (nothing
// finishes) by each placement policy; what is measured is how much GPU capacity
// is allocated when the first task cannot be placed, how much demand goes
// unplaced, and how much of the capacity left over is fragmented
// (docs/simulator.md, "Fragmentation-aware placement").
#ifndef GANDIVA_SCHED_FRACTIONAL_EXPERIMENT_H_
#define GANDIVA_SCHED_FRACTIONAL_EXPERIMENT_H_

#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::sched {

struct FractionalOptions {
  std::string tasks_path;  // openb_pod_list_default.csv
  std::string nodes_path;  // openb_node_list_gpu_node.csv
  std::vector<std::string> policies = {"first-fit", "best-fit", "fgd"};
  // "random": the tasks in a shuffled order, one run per seed; "trace": in
  // creation-time order, one run.
  std::string order = "random";
  std::vector<int> seeds = {1, 2, 3, 4, 5};
  // The workload's GPU demand as a multiple of the trace's: above 1 the trace
  // is drawn again (a fresh shuffle per pass) until the demand is reached.
  double inflate = 1.0;
  // What FGD measures fragmentation against: "trace" (the GPU tasks of the
  // whole trace) or "seen" (those that have arrived so far, this one included).
  std::string mix = "trace";
  int threads = 2;
};

// One policy on one task order.
struct FractionalRun {
  std::string policy;
  int seed = -1;  // -1: trace order
  long tasks = 0, placed = 0, failed = 0;
  // When the first task could not be placed (all 0 if every task was placed):
  // GPU demand arrived so far and GPU capacity allocated, as shares of the
  // cluster's capacity (equal: every task before it was placed), and the
  // GPUs then fragmented for the trace's task mix.
  long first_failure = -1;  // index of that task in the arrival order
  double arrived_at_first_failure = 0, allocated_at_first_failure = 0;
  double fragmented_gpus_at_first_failure = 0;
  int first_failed_num_gpu = 0, first_failed_gpu_milli = 0;  // what that task asked for
  // Over the whole run: unplaced GPU demand (share of the arrived demand), and
  // at its end the allocated share, the unallocated GPUs, and how many of them
  // are fragmented for the trace's task mix.
  double unplaced_demand = 0;
  double allocated_at_end = 0;
  double unallocated_gpus = 0, fragmented_gpus = 0;
  double seconds = 0;  // wall time of the run
};

struct FractionalReport {
  std::string tasks_path, nodes_path, order, mix;
  double inflate = 1;
  int nodes = 0, trace_tasks = 0;
  double capacity_gpus = 0;         // the cluster's GPUs
  double trace_demand_gpus = 0;     // GPU demand of the trace's tasks, in GPUs
  std::vector<FractionalRun> runs;  // policy by policy, seed by seed
};

// Errors: the readers' (not_found, invalid_argument FILE:LINE), and
// invalid_argument for bad options.
StatusOr<FractionalReport> RunFractionalExperiment(const FractionalOptions& options);
// One row per policy: means over the seeds (min-max where there are several).
std::string FormatFractionalTable(const FractionalReport& report);
std::string FractionalReportToJson(const FractionalReport& report);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_FRACTIONAL_EXPERIMENT_H_
