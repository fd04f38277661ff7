// What the device plugin knows of its node, read from gandivad's API
// (list_devices, list_jobs) and from a directory of health marks.
//
// Health: gandivad does not watch a GPU's health itself (no NVML, no Xid
// errors), so the plugin takes three signs: a device gandivad no longer lists,
// gandivad not answering (every device: a job started now would run without
// it), and a file named after the device in --health-dir (its contents the
// reason), which whatever does watch the GPUs (DCGM, a node problem detector,
// an operator) writes and removes.
#ifndef GANDIVA_K8S_NODE_VIEW_H_
#define GANDIVA_K8S_NODE_VIEW_H_

#include <string>
#include <vector>

#include "gandiva/protocol/client.h"
#include "shares.h"

namespace gandiva::k8s {

// gandivad's devices with their load (DeviceView::load); unavailable when it
// does not answer.
StatusOr<std::vector<DeviceView>> ReadNode(ApiClient& gandivad);

// The devices to advertise now: what gandivad says (or, when it did not
// answer, the known ones, unhealthy), the known devices it stopped listing
// (unhealthy: kubelet is told, rather than the device vanishing), then the
// health marks in health_dir ("" for none) on top.
std::vector<DeviceView> Advertised(const std::vector<DeviceView>& known,
                                   const StatusOr<std::vector<DeviceView>>& now,
                                   const std::string& health_dir);

}  // namespace gandiva::k8s

#endif  // GANDIVA_K8S_NODE_VIEW_H_
