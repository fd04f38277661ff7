// kubelet's DevicePlugin service over the node's shares (shares.h): the share
// list and its updates (ListAndWatch), preferred allocations by measured load,
// and Allocate's answer: CDI device names, GANDIVA_DEVICES and GANDIVA_SHARES.
#ifndef GANDIVA_K8S_PLUGIN_SERVICE_H_
#define GANDIVA_K8S_PLUGIN_SERVICE_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "deviceplugin.grpc.pb.h"
#include "shares.h"

namespace gandiva::k8s {

struct PluginOptions {
  int shares_per_device = 4;
  // Also name NVIDIA's CDI device of a GPU ("nvidia.com/gpu=0", from
  // `nvidia-ctk cdi generate`): the driver's libraries come with it.
  bool nvidia_cdi = false;
};

class PluginService final : public v1beta1::DevicePlugin::Service {
 public:
  explicit PluginService(PluginOptions options) : options_(options) {}

  // The devices as now seen; open ListAndWatch streams get the share list
  // again when a share's health changed, a device came or went.
  void Update(std::vector<DeviceView> devices);
  std::vector<DeviceView> devices() const;
  // Ends every ListAndWatch stream (before the server shuts down).
  void Stop();

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override;
  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override;
  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override;
  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override;

 private:
  const PluginOptions options_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<DeviceView> devices_;  // guarded by mu_
  std::vector<ShareState> shares_;   // guarded by mu_: what streams were last sent
  uint64_t version_ = 0;             // guarded by mu_: bumped when shares_ changes
  bool stopped_ = false;             // guarded by mu_
};

}  // namespace gandiva::k8s

#endif  // GANDIVA_K8S_PLUGIN_SERVICE_H_
