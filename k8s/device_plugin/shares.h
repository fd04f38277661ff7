// The device plugin's rules, apart from gRPC (unit-tested alone): each device
// of the node is offered to kubelet as N shares ("gpu0-s0" .. "gpu0-s3"), all
// healthy or unhealthy with their device; a preferred allocation takes the
// shares of the least loaded healthy device; a container's shares name one
// device, which Allocate turns into its CDI device and environment.
#ifndef GANDIVA_K8S_SHARES_H_
#define GANDIVA_K8S_SHARES_H_

#include <map>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::k8s {

// A device as the plugin last saw it.
struct DeviceView {
  std::string name;  // gandivad's ("gpu0", "cpu1")
  bool gpu = false;
  bool healthy = true;
  std::string why_unhealthy;  // for the log
  // Lower is preferred: the jobs gandivad has on the device, plus how far
  // their measured throughput is below running alone (0..1, from their
  // rate_vs_alone where gandivad has measured it), which breaks ties.
  double load = 0;
};

// "gpu0-s2"; the id kubelet knows a share by (at most 63 characters).
std::string ShareId(const std::string& device, int share);
// The device of a share id made by ShareId; invalid_argument otherwise.
StatusOr<std::string> DeviceOfShare(const std::string& id);

struct ShareState {
  std::string id;
  bool healthy;
};
// Every share of every device, in device order then share order.
std::vector<ShareState> ListShares(const std::vector<DeviceView>& devices, int shares_per_device);

// Of `available` (share ids), `size` shares: those of must_include first, then
// on as few devices as it can, the least loaded healthy ones first (a device
// with must_include shares before others). Fewer than size when not enough
// are available (kubelet then chooses itself).
std::vector<std::string> PreferredShares(const std::vector<std::string>& available,
                                         const std::vector<std::string>& must_include, int size,
                                         const std::vector<DeviceView>& devices);

// The one device that all of a container's shares are on. A container's
// shares on several devices are refused: the environment can name one device
// per container (docs/kubernetes.md), and preferred allocations keep them on one.
StatusOr<std::string> DeviceOfContainer(const std::vector<std::string>& share_ids,
                                        const std::vector<DeviceView>& devices);

}  // namespace gandiva::k8s

#endif  // GANDIVA_K8S_SHARES_H_
