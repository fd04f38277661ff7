// The job and device handlers; see node_handlers.h.
#include "api/node_handlers.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "gandiva/common/clock.h"
#include "gandiva/common/units.h"
#include "jobs/container_peer.h"
#include "node.h"

namespace gandiva::controller {

StatusOr<uint32_t> RanksFromRequest(const Json& req) {
  const int64_t ranks = req.value("ranks", int64_t{1});
  if (ranks < 1 || ranks > kMaxRanks)
    return InvalidArgument("ranks must be in 1.." + std::to_string(kMaxRanks) + ", not " +
                           std::to_string(ranks));
  return static_cast<uint32_t>(ranks);
}

Status DevicesFromRequest(const Json& req, NewJob& job) {
  job.device = req.value("device", "");
  if (!req.contains("devices")) return Status::Ok();
  if (!job.device.empty()) return InvalidArgument("give device or devices, not both");
  job.devices = req.at("devices").get<std::vector<std::string>>();
  if (job.devices.empty()) return InvalidArgument("devices must name at least one device");
  if (job.devices.size() == 1) job.device = job.devices.front(), job.devices.clear();
  return Status::Ok();
}

using protocol::MessageType;

namespace {

Json JobJson(Node& node, const Job& job) {
  Json j =
      JobToJson(job, node.JobHeld(job), node.UsageOf(job), node.migrator().OperationOf(job.id));
  j["ranks"] = job.ranks;
  j["gang_error"] = node.GangErrorOf(job);
  j["boundary_warning"] =
      NoBoundaryWarning(job, MonotonicNowNs(), node.options().boundary_wait_ms * kMs);
  return j;
}

StatusOr<Json> ListJobs(Node& node, const Json& req) {
  Json list = Json::array();
  if (req.contains("job")) {
    auto job = node.jobs().Find(req["job"].get<uint64_t>());
    if (!job.ok()) return NotFound("no job " + req["job"].dump());
    list.push_back(JobJson(node, *job));
  } else {
    for (const Job& job : node.jobs().All()) list.push_back(JobJson(node, job));
  }
  return Json{{"jobs", list}};
}

StatusOr<Json> RegisterJob(Node& node, const Call& call) {
  const Json& req = call.body();
  NewJob n;
  // The kernel says where the caller runs (jobs/container_peer.h), not the caller.
  GD_ASSIGN_OR_RETURN(n.in_container, InContainer(call.caller.pid));
  n.command = req.at("command").get<std::vector<std::string>>();
  n.name = req.value("name", "");
  GD_RETURN_IF_ERROR(DevicesFromRequest(req, n));
  n.weight = req.value("weight", 1.0);
  n.cwd = req.value("cwd", "");
  GD_ASSIGN_OR_RETURN(n.ranks, RanksFromRequest(req));
  GD_ASSIGN_OR_RETURN(n.env, protocol::EnvFromRequest(req));
  n.owner_uid = req.value("uid", int64_t{-1});
  n.managed_by = req.value("managed_by", "");
  if (req.contains("uid") && (n.owner_uid < 0 || n.owner_uid > 0xfffffffe))
    return InvalidArgument("uid must be a user id, not " + req["uid"].dump());
  GD_ASSIGN_OR_RETURN(Job job, node.Register(std::move(n)));
  return Json{{"job", job.id},
              {"name", job.name},
              {"device", job.device},
              {"devices", job.devices},
              {"device_kind", node.FindDevice(job.device)->info().kind},
              {"control_block", job.block->name()},
              {"lease_ms", node.options().lease_ms},
              {"ranks", job.ranks},
              {"env", node.JobEnvironment(job.devices)}};
}

// The pid is gandivad's by now: Node::Handle turned the caller's into it.
StatusOr<Json> JobStarted(Node& node, const Json& req) {
  GD_ASSIGN_OR_RETURN(Job job, node.jobs().Live(req.at("job").get<int64_t>()));
  const int64_t pid = req.at("pid").get<int64_t>();
  if (pid <= 0 || pid > std::numeric_limits<int>::max())
    return InvalidArgument("pid must be a process id, not " + std::to_string(pid));
  if (job.pid != 0) return FailedPrecondition("job " + std::to_string(job.id) + " already started");
  if (req.contains("env")) {
    GD_ASSIGN_OR_RETURN(auto env, protocol::EnvFromRequest(req));
    GD_RETURN_IF_ERROR(node.jobs().UpdateLive(job.id, [&](Job& j) {
      j.env = std::move(env);
      return Status::Ok();
    }));
  }
  GD_RETURN_IF_ERROR(node.SetProcess(job.id, static_cast<int>(pid), /*spawned=*/false));
  return Json::object();
}

StatusOr<Json> JobExited(Node& node, const Json& req) {
  const uint64_t id = req.at("job").get<uint64_t>();
  GD_ASSIGN_OR_RETURN(Job job, node.jobs().Find(id));
  const int code = req.at("exit_code").get<int>();
  const int signal = req.value("signal", 0);
  if (signal < 0 || signal >= 65) return InvalidArgument("bad signal " + std::to_string(signal));
  node.EndJob(id, code != 0, code, EndFromReport(code, signal));
  GD_RETURN_IF_ERROR(node.jobs().SetExitCode(id, code, EndFromReport(code, signal)));
  return Json::object();
}

StatusOr<Json> Suspend(Node& node, const Json& req) {
  GD_ASSIGN_OR_RETURN(Job job, node.jobs().Live(req.at("job").get<int64_t>()));
  node.SetUserHeld(job.id, true);
  return Json{{"state", job.State()}};
}

StatusOr<Json> Resume(Node& node, const Json& req) {
  GD_ASSIGN_OR_RETURN(Job job, node.jobs().Live(req.at("job").get<int64_t>()));
  if (!node.JobHeld(job))
    return FailedPrecondition("job " + std::to_string(job.id) + " is not suspended");
  // Neither a job being checkpointed or migrated nor a migration's copy not
  // yet handed over (a scheduler restarted mid-migration may ask).
  GD_RETURN_IF_ERROR(node.migrator().MayResume(job.id));
  node.SetUserHeld(job.id, false);
  return Json{{"state", job.State()}};
}

StatusOr<Json> Kill(Node& node, const Json& req) {
  GD_ASSIGN_OR_RETURN(Job job, node.jobs().Live(req.at("job").get<int64_t>()));
  if (job.pid <= 0)
    return FailedPrecondition("job " + std::to_string(job.id) + " has no process yet");
  const int sig = req.value("signal", SIGTERM);
  if (sig <= 0 || sig >= 65) return InvalidArgument("bad signal " + std::to_string(sig));
  node.Awaken(job);  // a job stopped while parked acts on the signal
  GD_RETURN_IF_ERROR(node.jobs().Signal(job.id, sig));
  return Json::object();
}

StatusOr<Json> SetSlice(Node& node, const Json& req) {
  const std::string name = req.at("device").get<std::string>();
  DeviceLoop* dev = node.FindDevice(name);
  if (!dev) return NotFound("no device '" + name + "'");
  const int64_t ms = req.at("ms").get<int64_t>();
  if (ms < static_cast<int64_t>(kMinSliceMs) || ms > static_cast<int64_t>(kMaxSliceMs))
    return InvalidArgument("slice must be " + std::to_string(kMinSliceMs) + ".." +
                           std::to_string(kMaxSliceMs) + " ms, not " + std::to_string(ms));
  dev->SetSlice(static_cast<uint64_t>(ms) * kMs);
  return Json::object();
}

StatusOr<Json> SetShareMode(Node& node, const Json& req) {
  const std::string name = req.at("device").get<std::string>();
  DeviceLoop* dev = node.FindDevice(name);
  if (!dev) return NotFound("no device '" + name + "'");
  const std::string mode_text = req.at("mode").get<std::string>();
  const auto mode = protocol::FromString<ShareMode>(mode_text);
  if (!mode)
    return InvalidArgument("share mode must be pack, slice or auto, not '" + mode_text + "'");
  const int64_t capacity = req.value("capacity", int64_t{kDefaultPackCapacity});
  if (capacity < 2 || capacity > kMaxPackCapacity)
    return InvalidArgument("capacity must be 2.." + std::to_string(kMaxPackCapacity) + ", not " +
                           std::to_string(capacity));
  const int64_t window_ms = req.value("window_ms", static_cast<int64_t>(kDefaultShareWindowMs));
  if (window_ms < static_cast<int64_t>(kMinShareWindowMs) ||
      window_ms > static_cast<int64_t>(kMaxShareWindowMs))
    return InvalidArgument("window_ms must be " + std::to_string(kMinShareWindowMs) + ".." +
                           std::to_string(kMaxShareWindowMs) + ", not " +
                           std::to_string(window_ms));
  dev->SetShareMode(*mode, static_cast<int>(capacity), static_cast<uint64_t>(window_ms) * kMs);
  return Json::object();
}

StatusOr<Json> SetWeight(Node& node, const Json& req) {
  GD_ASSIGN_OR_RETURN(Job job, node.jobs().Live(req.at("job").get<int64_t>()));
  GD_RETURN_IF_ERROR(node.SetWeight(job.id, req.at("weight").get<double>()));
  return Json::object();
}

StatusOr<Json> AssignDevice(Node& node, const Json& req) {
  GD_ASSIGN_OR_RETURN(Job job, node.jobs().Live(req.at("job").get<int64_t>()));
  GD_RETURN_IF_ERROR(node.AssignDevice(job.id, req.at("device").get<std::string>()));
  return Json::object();
}

StatusOr<Json> ListSwitches(Node& node, const Json& req) {
  const std::string only = req.value("device", "");
  if (!only.empty() && !node.FindDevice(only)) return NotFound("no device '" + only + "'");
  const int64_t limit = std::max<int64_t>(req.value("limit", int64_t{1000}), 0);
  Json list = Json::array();
  for (DeviceLoop* dev : node.Devices()) {
    if (!only.empty() && dev != node.FindDevice(only)) continue;
    for (const SwitchRecord& s : dev->Switches(static_cast<size_t>(limit), only))
      list.push_back({{"device", s.device},
                      {"from", s.from},
                      {"to", s.to},
                      {"at_s", s.at_ns / 1e9},
                      {"handover_ms", s.handover_ns / 1e6}});
  }
  return Json{{"switches", list}};
}

StatusOr<Json> ListDevices(Node& node) {
  Json list = Json::array();
  for (const std::string& name : node.DeviceNames()) {
    DeviceLoop* dev = node.FindDevice(name);
    DeviceSnapshot s = dev->Snapshot(name);
    s.mps = node.MpsStatus(*dev);
    list.push_back(DeviceToJson(s));
  }
  return Json{{"devices", list}};
}

StatusOr<Json> Hello(Node& node) {
  Json hello{{"version", protocol::kProtocolVersion},
             {"node", node.options().node},
             {"pid", getpid()},
             {"endpoint", node.options().endpoint},
             {"memory_limits", node.MemoryLimits()}};
  if (!node.blocks_dir().empty()) hello["blocks_dir"] = node.blocks_dir();
  return hello;
}

}  // namespace

void RegisterNodeHandlers(Dispatcher& d, Node& node) {
  using Fn = StatusOr<Json> (*)(Node&, const Json&);
  const std::pair<MessageType, Fn> with_body[] = {
      {MessageType::kListJobs, ListJobs},
      {MessageType::kJobStarted, JobStarted},
      {MessageType::kJobExited, JobExited},
      {MessageType::kSuspend, Suspend},
      {MessageType::kResume, Resume},
      {MessageType::kKill, Kill},
      {MessageType::kSetSlice, SetSlice},
      {MessageType::kSetShareMode, SetShareMode},
      {MessageType::kSetWeight, SetWeight},
      {MessageType::kAssignDevice, AssignDevice},
      {MessageType::kListSwitches, ListSwitches},
  };
  for (const auto& [type, fn] : with_body)
    d.OnSync(type, [&node, fn](const Call& c) { return fn(node, c.body()); });
  // Where the job runs is the kernel's word, not the caller's (container_peer.h).
  d.OnSync(MessageType::kRegisterJob, [&node](const Call& c) { return RegisterJob(node, c); });
  RegisterLaunchHandlers(d, node);
  d.OnSync(MessageType::kHello, [&node](const Call&) { return Hello(node); });
  d.OnSync(MessageType::kListDevices, [&node](const Call&) { return ListDevices(node); });
}

}  // namespace gandiva::controller
