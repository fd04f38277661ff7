// The machines of a cluster and their GPUs, loaded from the Philly machine list
// or the Alibaba PAI machine spec. Immutable once built.
#ifndef GANDIVA_SCHED_TOPOLOGY_H_
#define GANDIVA_SCHED_TOPOLOGY_H_

#include <string>
#include <vector>

#include "gandiva/scheduler/types.h"
#include "gandiva/status.h"

namespace gandiva::sched {

struct Machine {
  std::string name;
  int gpu_type = 0;  // index into Topology::gpu_types()
  GpuId first_gpu = 0;
  int num_gpus = 0;
};

struct GpuType {
  std::string name;        // as in the machine list: "12GB", "V100", ...
  std::string perf_class;  // co-location table column: "k80", "p100" or "v100"
  double mem_gb = 0;
  bool high_end = false;  // the best class in this cluster (reserve-and-pack keeps these)
};

class Topology {
 public:
  // Machines must be non-empty; GPU ids are assigned machine by machine.
  static Topology Build(std::vector<GpuType> types, std::vector<Machine> machines);
  // A cluster of `machines` identical machines of `gpus_per_machine` GPUs (tests).
  static Topology Uniform(int machines, int gpus_per_machine);

  const std::vector<Machine>& machines() const { return machines_; }
  const std::vector<GpuType>& gpu_types() const { return types_; }
  int num_gpus() const { return static_cast<int>(gpu_machine_.size()); }
  int machine_of(GpuId g) const { return gpu_machine_[g]; }
  int gpu_type_of(GpuId g) const { return machines_[gpu_machine_[g]].gpu_type; }
  int max_gpus_per_machine() const { return max_per_machine_; }
  // Fewest machines an n-GPU gang can possibly use; more than that is "spread".
  int MinMachines(int n) const { return (n + max_per_machine_ - 1) / max_per_machine_; }

 private:
  std::vector<GpuType> types_;
  std::vector<Machine> machines_;
  std::vector<int> gpu_machine_;
  int max_per_machine_ = 1;
};

// philly/cluster_machine_list.csv: "machineId, number of GPUs, single GPU mem".
StatusOr<Topology> LoadPhillyMachines(const std::string& path);
// alibaba/pai_machine_spec.csv (no header): machine,gpu_type,cap_cpu,cap_mem,cap_gpu.
// Machines without GPUs are dropped.
StatusOr<Topology> LoadPaiMachines(const std::string& path);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_TOPOLOGY_H_
