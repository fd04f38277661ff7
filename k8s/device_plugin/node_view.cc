#include "node_view.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "gandiva/protocol/codec.h"
#include "gandiva/protocol/enums.h"

namespace gandiva::k8s {

using protocol::Json;
using protocol::MessageType;

StatusOr<std::vector<DeviceView>> ReadNode(ApiClient& gandivad) {
  GD_ASSIGN_OR_RETURN(Json devices, gandivad.Call(MessageType::kListDevices));
  GD_ASSIGN_OR_RETURN(Json jobs, gandivad.Call(MessageType::kListJobs));
  // The measured slowdown of each device's jobs: 1 - rate_vs_alone, where measured.
  std::map<std::string, std::pair<double, int>> slowdown;  // device -> (sum, count)
  for (const Json& j : jobs.value("jobs", Json::array())) {
    const Json& rate = j.value("rate_vs_alone", Json());
    if (!rate.is_number()) continue;
    auto& [sum, n] = slowdown[j.value("device", "")];
    sum += std::clamp(1.0 - rate.get<double>(), 0.0, 1.0);
    ++n;
  }
  std::vector<DeviceView> view;
  for (const Json& d : devices.value("devices", Json::array())) {
    DeviceView v;
    v.name = d.value("name", "");
    v.gpu = protocol::EnumFromJson<protocol::DeviceKind>(d.value("kind", Json())) ==
            protocol::DeviceKind::kGpu;
    v.load = static_cast<double>(d.value("jobs", Json::array()).size());
    if (auto s = slowdown.find(v.name); s != slowdown.end() && s->second.second > 0)
      v.load += s->second.first / s->second.second;
    if (!v.name.empty()) view.push_back(std::move(v));
  }
  return view;
}

namespace {

// The reason in DIR/<device>, or "" when there is no such file.
std::string HealthMark(const std::string& dir, const std::string& device) {
  if (dir.empty()) return "";
  std::ifstream in(dir + "/" + device);
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  std::string why = text.str();
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  return "marked unhealthy in " + dir + "/" + device + (why.empty() ? "" : ": " + why);
}

}  // namespace

std::vector<DeviceView> Advertised(const std::vector<DeviceView>& known,
                                   const StatusOr<std::vector<DeviceView>>& now,
                                   const std::string& health_dir) {
  std::vector<DeviceView> out;
  if (now.ok()) {
    out = *now;
    for (const DeviceView& k : known) {
      const bool listed = std::any_of(out.begin(), out.end(),
                                      [&](const DeviceView& d) { return d.name == k.name; });
      if (listed) continue;
      DeviceView gone = k;
      gone.healthy = false;
      gone.why_unhealthy = "gandivad no longer lists it";
      out.push_back(gone);
    }
  } else {
    out = known;
    for (DeviceView& d : out) {
      d.healthy = false;
      d.why_unhealthy = "gandivad does not answer: " + now.status().message();
    }
  }
  for (DeviceView& d : out) {
    if (!now.ok() || !d.why_unhealthy.empty()) continue;
    d.healthy = true;
    if (std::string why = HealthMark(health_dir, d.name); !why.empty()) {
      d.healthy = false;
      d.why_unhealthy = why;
    }
  }
  return out;
}

}  // namespace gandiva::k8s
