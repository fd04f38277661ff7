// One-call simulation: load cluster, co-location table and trace, replay them
// under one or more policies, and report. What `gandiva sim`, the bench and
// the replay tests share.
#ifndef GANDIVA_SCHED_SIM_RUNNER_H_
#define GANDIVA_SCHED_SIM_RUNNER_H_

#include <string>
#include <vector>

#include "gandiva/scheduler/perf_model.h"
#include "gandiva/scheduler/policy.h"
#include "gandiva/scheduler/report.h"
#include "gandiva/scheduler/sim_cluster.h"
#include "gandiva/scheduler/topology.h"
#include "gandiva/scheduler/trace.h"

namespace gandiva::sched {

struct SimSetup {
  std::string trace_path;
  // "philly" (philly/cluster_machine_list.csv), "pai" (alibaba/pai_machine_spec.csv)
  // or "uniform:MACHINESxGPUS".
  std::string cluster = "philly";
  std::string machines_path;    // overrides the default file for the cluster kind
  std::string colocation_path;  // empty: neutral performance model
  TraceOptions trace;
  SimConfig sim;
  PolicyOptions policy;
};

struct LoadedSim {
  Topology topology;
  PerfModel perf = PerfModel::Neutral();
  Trace trace;
  std::vector<SimJobSpec> jobs;
  std::string cluster_name;
};

// Errors: whatever the loaders return (not_found, invalid_argument, data_loss).
StatusOr<LoadedSim> LoadSim(const SimSetup& setup);
// Replays `loaded` under `policy`; Report::sim_seconds is the run's wall time.
StatusOr<Report> RunPolicy(const LoadedSim& loaded, const std::string& policy, const SimConfig& sim,
                           const PolicyOptions& options);

// Renders PNG plots (JCT CDF per policy, utilisation over time) from a JSON
// report with /usr/bin/python3 + matplotlib. Errors: unavailable if it fails.
Status WritePlots(const std::string& json_path, const std::string& out_prefix,
                  const std::string& python = "/usr/bin/python3");

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_SIM_RUNNER_H_
