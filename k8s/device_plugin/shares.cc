#include "shares.h"

#include <algorithm>
#include <charconv>
#include <set>

namespace gandiva::k8s {

namespace {

constexpr const char* kShareMark = "-s";

const DeviceView* FindDevice(const std::vector<DeviceView>& devices, const std::string& name) {
  for (const DeviceView& d : devices)
    if (d.name == name) return &d;
  return nullptr;
}

}  // namespace

std::string ShareId(const std::string& device, int share) {
  return device + kShareMark + std::to_string(share);
}

StatusOr<std::string> DeviceOfShare(const std::string& id) {
  const size_t mark = id.rfind(kShareMark);
  int share = -1;
  if (mark == std::string::npos || mark == 0) return InvalidArgument("not a share id: " + id);
  const char* digits = id.data() + mark + 2;
  const char* end = id.data() + id.size();
  auto [p, ec] = std::from_chars(digits, end, share);
  if (ec != std::errc() || p != end || digits == end || share < 0)
    return InvalidArgument("not a share id: " + id);
  return id.substr(0, mark);
}

std::vector<ShareState> ListShares(const std::vector<DeviceView>& devices, int shares_per_device) {
  std::vector<ShareState> shares;
  for (const DeviceView& d : devices)
    for (int k = 0; k < shares_per_device; ++k) shares.push_back({ShareId(d.name, k), d.healthy});
  return shares;
}

std::vector<std::string> PreferredShares(const std::vector<std::string>& available,
                                         const std::vector<std::string>& must_include, int size,
                                         const std::vector<DeviceView>& devices) {
  std::vector<std::string> chosen;
  std::set<std::string> taken;
  std::map<std::string, int> included_on;  // device -> its must_include shares
  for (const std::string& id : must_include) {
    if (static_cast<int>(chosen.size()) >= size || !taken.insert(id).second) continue;
    chosen.push_back(id);
    if (auto d = DeviceOfShare(id); d.ok()) ++included_on[*d];
  }
  // The available shares per device, in kubelet's order.
  std::map<std::string, std::vector<std::string>> free_on;
  for (const std::string& id : available) {
    auto d = DeviceOfShare(id);
    if (!d.ok() || taken.count(id)) continue;
    const DeviceView* view = FindDevice(devices, *d);
    if (view && !view->healthy) continue;
    free_on[*d].push_back(id);
  }
  std::vector<std::string> order;
  for (const auto& [device, ids] : free_on) order.push_back(device);
  auto load = [&](const std::string& name) {
    const DeviceView* view = FindDevice(devices, name);
    return view ? view->load : 1e9;  // a device gandivad does not list: last
  };
  const int wanted = size - static_cast<int>(chosen.size());
  // Devices that already hold must_include shares first, then those that can
  // take the whole rest (fewest devices), then the least loaded, then by name.
  std::sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    const bool ia = included_on.count(a) != 0, ib = included_on.count(b) != 0;
    if (ia != ib) return ia;
    const bool fa = static_cast<int>(free_on[a].size()) >= wanted;
    const bool fb = static_cast<int>(free_on[b].size()) >= wanted;
    if (fa != fb) return fa;
    if (load(a) != load(b)) return load(a) < load(b);
    return a < b;
  });
  for (const std::string& device : order)
    for (const std::string& id : free_on[device]) {
      if (static_cast<int>(chosen.size()) >= size) return chosen;
      chosen.push_back(id);
    }
  return chosen;
}

StatusOr<std::string> DeviceOfContainer(const std::vector<std::string>& share_ids,
                                        const std::vector<DeviceView>& devices) {
  if (share_ids.empty()) return InvalidArgument("a container was given no shares");
  std::string device;
  for (const std::string& id : share_ids) {
    GD_ASSIGN_OR_RETURN(std::string d, DeviceOfShare(id));
    if (!device.empty() && d != device)
      return InvalidArgument("shares on several devices (" + device + ", " + d +
                             ") for one container: gandiva gives a container one device");
    device = d;
  }
  if (!FindDevice(devices, device)) return NotFound("no device " + device + " on this node");
  return device;
}

}  // namespace gandiva::k8s
