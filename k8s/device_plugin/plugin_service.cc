#include "plugin_service.h"

#include <chrono>

#include "gandiva/cdi/cdi_spec.h"
#include "gandiva/common/log.h"
#include "gandiva/contract/environment.h"

namespace gandiva::k8s {

namespace {

// How many shares of its device the container was given: the pod's command
// passes it to `gandiva run --weight` (packaging/kubernetes/example-training-job.yaml),
// so that two shares get twice one share's time. Nothing in gandiva reads it itself.
constexpr const char* kEnvShares = "GANDIVA_SHARES";
constexpr const char* kHealthy = "Healthy";
constexpr const char* kUnhealthy = "Unhealthy";

bool SameShares(const std::vector<ShareState>& a, const std::vector<ShareState>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].id != b[i].id || a[i].healthy != b[i].healthy) return false;
  return true;
}

}  // namespace

void PluginService::Update(std::vector<DeviceView> devices) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const DeviceView& d : devices) {
    const bool was_healthy = [&] {
      for (const DeviceView& old : devices_)
        if (old.name == d.name) return old.healthy;
      return true;
    }();
    if (was_healthy && !d.healthy)
      GD_LOG(kWarn, "device %s unhealthy: %s", d.name.c_str(), d.why_unhealthy.c_str());
    else if (!was_healthy && d.healthy)
      GD_LOG(kInfo, "device %s healthy again", d.name.c_str());
  }
  devices_ = std::move(devices);
  std::vector<ShareState> shares = ListShares(devices_, options_.shares_per_device);
  if (version_ > 0 && SameShares(shares, shares_)) return;  // a load changed: nothing to send
  shares_ = std::move(shares);
  ++version_;
  changed_.notify_all();
}

std::vector<DeviceView> PluginService::devices() const {
  std::lock_guard<std::mutex> lock(mu_);
  return devices_;
}

void PluginService::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  changed_.notify_all();
}

grpc::Status PluginService::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                   v1beta1::DevicePluginOptions* out) {
  out->set_pre_start_required(false);
  out->set_get_preferred_allocation_available(true);
  return grpc::Status::OK;
}

grpc::Status PluginService::ListAndWatch(
    grpc::ServerContext* ctx, const v1beta1::Empty*,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  uint64_t sent = 0;  // the version last sent on this stream
  while (true) {
    v1beta1::ListAndWatchResponse list;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Wakes at each change, and each second to notice kubelet hanging up.
      changed_.wait_for(lock, std::chrono::seconds(1),
                        [&] { return stopped_ || (version_ > 0 && version_ != sent); });
      if (stopped_ || ctx->IsCancelled()) return grpc::Status::OK;
      if (version_ == 0 || version_ == sent) continue;
      sent = version_;
      for (const ShareState& s : shares_) {
        v1beta1::Device* d = list.add_devices();
        d->set_id(s.id);
        d->set_health(s.healthy ? kHealthy : kUnhealthy);
      }
    }
    if (!writer->Write(list)) return grpc::Status::OK;  // kubelet went away
  }
}

grpc::Status PluginService::GetPreferredAllocation(grpc::ServerContext*,
                                                   const v1beta1::PreferredAllocationRequest* req,
                                                   v1beta1::PreferredAllocationResponse* out) {
  const std::vector<DeviceView> devices = this->devices();
  for (const auto& c : req->container_requests()) {
    const std::vector<std::string> available(c.available_deviceids().begin(),
                                             c.available_deviceids().end());
    const std::vector<std::string> must(c.must_include_deviceids().begin(),
                                        c.must_include_deviceids().end());
    auto* r = out->add_container_responses();
    for (const std::string& id : PreferredShares(available, must, c.allocation_size(), devices))
      r->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status PluginService::Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                                     v1beta1::AllocateResponse* out) {
  const std::vector<DeviceView> devices = this->devices();
  for (const auto& c : req->container_requests()) {
    const std::vector<std::string> ids(c.devices_ids().begin(), c.devices_ids().end());
    auto device = DeviceOfContainer(ids, devices);
    if (!device.ok())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, device.status().message());
    const DeviceView* view = nullptr;
    for (const DeviceView& d : devices)
      if (d.name == *device) view = &d;
    if (!view->healthy)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          *device + " is unhealthy: " + view->why_unhealthy);
    auto* r = out->add_container_responses();
    r->add_cdi_devices()->set_name(cdi::QualifiedName(*device));
    if (view->gpu && options_.nvidia_cdi)
      r->add_cdi_devices()->set_name("nvidia.com/gpu=" + cdi::CdiDeviceName(*device));
    // The CDI device says so too; here as well for a runtime that applies the
    // CDI edits before these (either way the same value).
    (*r->mutable_envs())[runtime::kEnvDevices] = *device;
    (*r->mutable_envs())[kEnvShares] = std::to_string(ids.size());
    GD_LOG(kInfo, "allocated %zu share(s) of %s", ids.size(), device->c_str());
  }
  return grpc::Status::OK;
}

grpc::Status PluginService::PreStartContainer(grpc::ServerContext*,
                                              const v1beta1::PreStartContainerRequest*,
                                              v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;  // not asked for (pre_start_required is false)
}

}  // namespace gandiva::k8s
