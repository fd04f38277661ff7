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
};

// Parses "KIND:COUNT[,KIND:COUNT...]" (KIND gpu or cpu, COUNT 1..64), e.g. "cpu:1".
StatusOr<std::vector<DeviceInfo>> ParseDeviceSpec(const std::string& spec);

// The GPUs NVML reports; empty (not an error) when NVML or a GPU is absent.
std::vector<DeviceInfo> DiscoverGpus();

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_DEVICES_DEVICES_H_
