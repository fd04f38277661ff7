// The devices a node controller time-slices: real GPUs found through NVML
// (loaded at run time, so the daemon runs on machines without it), or devices
// given on the command line (e.g. `--devices cpu:2`, to slice CPU jobs).
#ifndef GANDIVA_NODE_DEVICES_DEVICES_H_
#define GANDIVA_NODE_DEVICES_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gandiva/protocol/enums.h"
#include "gandiva/status.h"

namespace gandiva::controller {

struct DeviceInfo {
  std::string name;  // "gpu0", "cpu0": what --device and the API call it
  protocol::DeviceKind kind = protocol::DeviceKind::kCpu;
  std::string model;  // e.g. "NVIDIA H100 80GB HBM3", or "host CPU"
  uint64_t memory_bytes = 0;
  int capacity = 1;  // jobs that may run at once
  // What CUDA_VISIBLE_DEVICES calls this GPU in its jobs' environment: its
  // UUID when NVML found it (right whatever order CUDA numbers GPUs in), else
  // its ordinal among the GPUs gandivad itself sees. Empty on a CPU device.
  std::string cuda_visible_id;
};

// The CUDA_VISIBLE_DEVICES entry of the `ordinal`-th GPU gandivad sees, when
// its own environment had `inherited` (null: unset): the ordinal, or the
// entry of the inherited list at that place (under Slurm, `2` of
// CUDA_VISIBLE_DEVICES=2,3 is gandivad's gpu0). Empty if the list is shorter.
std::string CudaVisibleId(int ordinal, const char* inherited);

// CUDA_VISIBLE_DEVICES for a job on `devices`: their ids, comma-separated, in
// the job's order (rank k uses the k-th); empty unless every one is a GPU
// with an id.
std::string CudaVisibleDevices(const std::vector<const DeviceInfo*>& devices);

// Parses "KIND:COUNT[,KIND:COUNT...]" (KIND gpu or cpu, COUNT 1..64), e.g.
// "cpu:1". GPUs get CudaVisibleId(n, `inherited_visible`); the spec may not
// name more GPUs than that list has.
StatusOr<std::vector<DeviceInfo>> ParseDeviceSpec(const std::string& spec,
                                                  const char* inherited_visible = nullptr);

// The GPUs NVML reports; empty (not an error) when NVML or a GPU is absent.
std::vector<DeviceInfo> DiscoverGpus();

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_DEVICES_DEVICES_H_
