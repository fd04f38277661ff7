// Loading a simulation's inputs and running policies over them.
#include "gandiva/scheduler/sim_runner.h"

#include <chrono>
#include <cstdio>

namespace gandiva::sched {

StatusOr<LoadedSim> LoadSim(const SimSetup& s) {
  LoadedSim out;
  if (s.cluster.rfind("uniform:", 0) == 0) {
    int machines = 0, gpus = 0;
    if (std::sscanf(s.cluster.c_str() + 8, "%dx%d", &machines, &gpus) != 2 || machines < 1 ||
        gpus < 1 || gpus > 64)
      return InvalidArgument("--cluster uniform:MxG needs machines x GPUs, e.g. uniform:16x8");
    out.topology = Topology::Uniform(machines, gpus);
  } else if (s.cluster == "philly") {
    GD_ASSIGN_OR_RETURN(out.topology, LoadPhillyMachines(s.machines_path));
  } else if (s.cluster == "pai") {
    GD_ASSIGN_OR_RETURN(out.topology, LoadPaiMachines(s.machines_path));
  } else {
    return InvalidArgument("unknown cluster '" + s.cluster + "' (philly, pai or uniform:MxG)");
  }
  out.cluster_name = s.cluster + " (" + std::to_string(out.topology.machines().size()) +
                     " machines, " + std::to_string(out.topology.num_gpus()) + " GPUs)";
  if (!s.colocation_path.empty()) {
    GD_ASSIGN_OR_RETURN(out.perf, PerfModel::Load(s.colocation_path));
  }
  GD_ASSIGN_OR_RETURN(out.trace, ReadTrace(s.trace_path, s.trace));
  GD_ASSIGN_OR_RETURN(out.jobs, BuildJobs(out.trace, out.topology, out.perf, s.sim.seed));
  return out;
}

StatusOr<Report> RunPolicy(const LoadedSim& loaded, const std::string& name, const SimConfig& sim,
                           const PolicyOptions& options) {
  GD_ASSIGN_OR_RETURN(auto policy, MakePolicy(name, options));
  auto start = std::chrono::steady_clock::now();
  SimCluster cluster(loaded.topology, &loaded.perf, loaded.jobs, sim);
  GD_ASSIGN_OR_RETURN(SimResult result, cluster.Run(*policy));
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  Report r = MakeReport(name, std::move(result));
  r.sim_seconds = wall;
  return r;
}

}  // namespace gandiva::sched
