// Device discovery: NVML via dlopen, or a spec from the command line.
#include "devices/devices.h"

#include <dlfcn.h>

#include <charconv>
#include <string_view>

#include "gandiva/common/log.h"

namespace gandiva::controller {

std::string CudaVisibleId(int ordinal, const char* inherited) {
  if (!inherited) return std::to_string(ordinal);
  std::string_view list(inherited);
  for (int i = 0;; ++i) {
    const size_t comma = list.find(',');
    if (i == ordinal) return std::string(list.substr(0, comma));
    if (comma == std::string_view::npos) return "";
    list.remove_prefix(comma + 1);
  }
}

std::string CudaVisibleDevices(const std::vector<const DeviceInfo*>& devices) {
  std::string out;
  for (const DeviceInfo* d : devices) {
    if (!d || d->kind != protocol::DeviceKind::kGpu || d->cuda_visible_id.empty()) return "";
    out += (out.empty() ? "" : ",") + d->cuda_visible_id;
  }
  return out;
}

StatusOr<std::vector<DeviceInfo>> ParseDeviceSpec(const std::string& spec,
                                                  const char* inherited_visible) {
  std::vector<DeviceInfo> out;
  int next_cpu = 0, next_gpu = 0;
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(start, comma - start);
    start = comma + 1;
    auto colon = item.find(':');
    if (colon == std::string::npos)
      return InvalidArgument("device spec '" + item + "' is not KIND:COUNT (e.g. cpu:1)");
    std::string kind = item.substr(0, colon);
    std::string count_text = item.substr(colon + 1);
    int count = 0;
    auto [p, ec] = std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    if (ec != std::errc() || p != count_text.data() + count_text.size() || count < 1 || count > 64)
      return InvalidArgument("device count '" + count_text + "' must be 1..64");
    const auto device_kind = protocol::FromString<protocol::DeviceKind>(kind);
    if (!device_kind) return InvalidArgument("device kind '" + kind + "' must be cpu or gpu");
    for (int i = 0; i < count; ++i) {
      DeviceInfo d;
      d.kind = *device_kind;
      d.name = kind + std::to_string(kind == "cpu" ? next_cpu++ : next_gpu++);
      d.model = kind == "cpu" ? "host CPU" : "configured GPU";
      if (d.kind == protocol::DeviceKind::kGpu) {
        const int ordinal = next_gpu - 1;
        d.cuda_visible_id = CudaVisibleId(ordinal, inherited_visible);
        if (d.cuda_visible_id.empty())
          return InvalidArgument("gpu" + std::to_string(ordinal) +
                                 " is not in this process's CUDA_VISIBLE_DEVICES (" +
                                 inherited_visible + ")");
      }
      out.push_back(d);
    }
  }
  if (out.empty()) return InvalidArgument("empty device spec");
  return out;
}

namespace {
// The few NVML entry points we need; signatures from nvml.h (stable since NVML 5).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct NvmlMemory {
  unsigned long long total, free, used;
};
}  // namespace

std::vector<DeviceInfo> DiscoverGpus() {
  std::vector<DeviceInfo> out;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return out;
  auto init = reinterpret_cast<nvmlReturn_t (*)()>(dlsym(lib, "nvmlInit_v2"));
  auto count_fn =
      reinterpret_cast<nvmlReturn_t (*)(unsigned*)>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle_fn = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
      dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name_fn = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(
      dlsym(lib, "nvmlDeviceGetName"));
  auto mem_fn = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, NvmlMemory*)>(
      dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto uuid_fn = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned)>(
      dlsym(lib, "nvmlDeviceGetUUID"));
  unsigned count = 0;
  if (!init || !count_fn || !handle_fn || init() != 0 || count_fn(&count) != 0) {
    GD_LOG(kInfo, "NVML present but not usable; no GPUs discovered");
    return out;
  }
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if (handle_fn(i, &dev) != 0) continue;
    DeviceInfo d;
    d.kind = protocol::DeviceKind::kGpu;
    d.name = "gpu" + std::to_string(i);
    char name[96] = {0};
    if (name_fn && name_fn(dev, name, sizeof name) == 0) d.model = name;
    NvmlMemory mem{};
    if (mem_fn && mem_fn(dev, &mem) == 0) d.memory_bytes = mem.total;
    // NVML numbers GPUs by PCI bus, CUDA (by default) fastest first: only the
    // UUID ("GPU-...") names the same GPU to both.
    char uuid[96] = {0};
    d.cuda_visible_id = uuid_fn && uuid_fn(dev, uuid, sizeof uuid) == 0 ? uuid : std::to_string(i);
    out.push_back(d);
  }
  return out;
}

}  // namespace gandiva::controller
