// The job table, start and stop, and the API handlers; see controller.h.
// The threads are in controller_loops.cc, checkpoint and migration in
// controller_migration.cc.
#include "controller.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/profiler.h"

namespace gandiva::controller {

using protocol::MessageType;
using runtime::ControlBlock;
using Json = protocol::Json;

namespace {

int PidfdOpen(int pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

// A request's optional "env" object as a map; every value must be a string.
StatusOr<std::map<std::string, std::string>> EnvFromRequest(const Json& req) {
  std::map<std::string, std::string> env;
  if (!req.contains("env")) return env;
  for (auto it = req["env"].begin(); it != req["env"].end(); ++it) {
    if (!it.value().is_string())
      return InvalidArgument("env values must be strings ('" + it.key() + "')");
    env[it.key()] = it.value().get<std::string>();
  }
  return env;
}
}  // namespace

Controller::Controller(ControllerOptions options) : options_(std::move(options)) {
  for (const auto& d : options_.devices)
    devices_[d.name] = std::make_unique<Device>(d, options_.slice_ms * kMs);
}

Controller::~Controller() { Stop(); }

Status Controller::Start() {
  if (devices_.empty()) return InvalidArgument("no devices to schedule");
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  stop_event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || stop_event_fd_ < 0) return Internal("cannot create epoll/eventfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;  // job ids start at 1
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_event_fd_, &ev);
  started_ = true;
  for (auto& [name, dev] : devices_)
    dev->thread = std::thread([this, d = dev.get()] { DeviceLoop(d); });
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
  monitor_thread_ = std::thread([this] { MonitorLoop(); });
  return Status::Ok();
}

void Controller::Stop() {
  if (!started_ || stopping_.exchange(true)) return;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, dev] : devices_) dev->wake.notify_all();
    heartbeat_wake_.notify_all();
  }
  uint64_t one = 1;
  ssize_t ignored = write(stop_event_fd_, &one, sizeof one);
  (void)ignored;
  for (auto& [name, dev] : devices_)
    if (dev->thread.joinable()) dev->thread.join();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  if (monitor_thread_.joinable()) monitor_thread_.join();
  // Operations give up on `stopping_` within their timeouts; a held job is released below.
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& w : workers) w.join();
  std::lock_guard lock(mu_);
  int released = 0;
  for (auto& [id, job] : jobs_) {
    if (job->ended || !job->cb()) continue;
    runtime::ReleaseForever(job->cb());
    runtime::SharedControlBlock::Remove(job->block->name());
    ++released;
  }
  if (released) GD_LOG(kInfo, "released %d job(s); they run on unmanaged", released);
  close(epoll_fd_);
  close(stop_event_fd_);
}

void Controller::EndJob(Job& job, bool failed, int exit_code) {
  job.ended = true;
  job.failed = failed;
  job.exit_code = exit_code;
  job.ended_ns = MonotonicNowNs();
  if (job.running_since_ns) {
    job.device_time_ns += job.ended_ns - job.running_since_ns;
    job.running_since_ns = 0;
  }
  if (Device* dev = FindDevice(job.device)) {
    dev->slicer.RemoveJob(job.id);
    if (dev->last_parked_job == job.id) dev->last_parked_job = 0;
    dev->wake.notify_all();
  }
  if (job.pidfd >= 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, job.pidfd, nullptr);
    close(job.pidfd);
    job.pidfd = -1;
  }
  if (job.incoming_fd >= 0) {
    close(job.incoming_fd);
    job.incoming_fd = -1;
  }
  if (job.block) runtime::SharedControlBlock::Remove(job.block->name());
}

// ---------------------------------------------------------------- API

StatusOr<Json> Controller::Handle(const protocol::Request& request) {
  const Json& r = request.body;
  // These wait on jobs or peers and lock mu_ only around their own state.
  switch (request.type) {
    case MessageType::kCheckpoint:
      return Checkpoint(r);
    case MessageType::kMigrate:
      return Migrate(r);
    case MessageType::kMigratePrepare:
      return MigratePrepare(r);
    case MessageType::kMigrateBegin:
      return MigrateBegin(r);
    case MessageType::kMigrateChunk:
      return MigrateChunk(r, request.payload);
    case MessageType::kMigrateCommit:
      return MigrateCommit(r);
    case MessageType::kMigrateStart:
      return MigrateStart(r);
    case MessageType::kMigrateAbort:
      return MigrateAbort(r);
    default:
      break;
  }
  std::lock_guard lock(mu_);
  switch (request.type) {
    case MessageType::kHello:
      return Hello();
    case MessageType::kListDevices:
      return ListDevices();
    case MessageType::kListJobs:
      return ListJobs(r);
    case MessageType::kRegisterJob:
      return RegisterJob(r);
    case MessageType::kJobStarted:
      return JobStarted(r);
    case MessageType::kJobExited:
      return JobExited(r);
    case MessageType::kSuspend:
      return Suspend(r);
    case MessageType::kResume:
      return Resume(r);
    case MessageType::kKill:
      return Kill(r);
    case MessageType::kSetSlice:
      return SetSlice(r);
    case MessageType::kSetWeight:
      return SetWeight(r);
    case MessageType::kAssignDevice:
      return AssignDevice(r);
    case MessageType::kListSwitches:
      return ListSwitches(r);
    default:
      break;
  }
  return Unimplemented("request type not handled");
}

Job* Controller::FindJob(uint64_t id) {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

Controller::Device* Controller::FindDevice(const std::string& name) {
  auto it = devices_.find(name);
  return it == devices_.end() ? nullptr : it->second.get();
}

StatusOr<Job*> Controller::LiveJob(const Json& req) {
  const int64_t id = req.at("job").get<int64_t>();
  auto it = jobs_.find(static_cast<uint64_t>(id));
  if (id <= 0 || it == jobs_.end()) return NotFound("no job " + std::to_string(id));
  if (it->second->ended)
    return FailedPrecondition("job " + std::to_string(id) + " has " +
                              JobStateName(it->second->State()));
  return it->second.get();
}

StatusOr<Json> Controller::Hello() {
  return Json{{"version", protocol::kProtocolVersion},
              {"node", options_.node},
              {"pid", getpid()},
              {"endpoint", options_.endpoint}};
}

StatusOr<Json> Controller::ListDevices() {
  Json list = Json::array();
  for (auto& [name, dev] : devices_) {
    CompletePendingSwitch(*dev);
    Json jobs = Json::array(), running = Json::array();
    for (auto& [id, job] : jobs_)
      if (!job->ended && job->device == name) jobs.push_back(id);
    for (uint64_t id : dev->slicer.Running()) running.push_back(id);
    double handover_sum = 0;
    for (const auto& s : dev->switches) handover_sum += s.handover_ns;
    list.push_back({{"name", name},
                    {"kind", dev->info.kind},
                    {"model", dev->info.model},
                    {"memory_bytes", dev->info.memory_bytes},
                    {"resident_bytes", ResidentBytes(*dev)},
                    {"capacity", dev->info.capacity},
                    {"slice_ms", dev->slicer.slice_ns() / kMs},
                    {"jobs", jobs},
                    {"running", running},
                    {"switches", dev->switch_count},
                    {"mean_handover_ms",
                     dev->switches.empty() ? 0.0 : handover_sum / dev->switches.size() / 1e6}});
  }
  return Json{{"devices", list}};
}

namespace {
Json OperationToJson(const std::optional<Operation>& op) {
  if (!op) return nullptr;
  return Json{{"kind", op->kind},
              {"state", op->state},
              {"step", op->step},
              {"error", op->error},
              {"target", op->target},
              {"bytes", op->bytes},
              {"downtime_ms", op->downtime_ms},
              {"to_job", op->to_job},
              {"duration_s", op->finished_ns ? (op->finished_ns - op->started_ns) / 1e9 : 0.0}};
}
}  // namespace

Json Controller::JobToJson(const Job& job) const {
  const ControlBlock* cb = job.cb();
  auto stats = runtime::ReadIterationStats(cb->profile);
  const uint64_t now = MonotonicNowNs();
  uint64_t device_time = job.device_time_ns;
  if (job.running_since_ns && now > job.running_since_ns) device_time += now - job.running_since_ns;
  const uint64_t end = job.ended ? job.ended_ns : now;
  return Json{{"id", job.id},
              {"name", job.name},
              {"device", job.device},
              {"state", JobStateName(job.State())},
              {"held", job.held},
              {"weight", job.weight},
              {"pid", job.pid},
              {"command", job.command},
              {"iterations", stats.iterations},
              {"mean_ms", stats.mean_ms},
              {"ewma_ms", stats.ewma_ms},
              {"p50_ms", stats.p50_ms},
              {"p99_ms", stats.p99_ms},
              {"iterations_per_s", stats.iterations_per_s},
              {"slices", job.slices},
              {"swaps", job.swaps},
              {"swapped_bytes", cb->swapped_bytes.load()},
              {"parks", cb->park_count.load()},
              {"device_time_s", device_time / 1e9},
              {"wall_time_s", (end - job.registered_ns) / 1e9},
              {"device_bytes", cb->device_bytes.load()},
              {"device_allocations", cb->device_allocations.load()},
              {"auto_boundaries", cb->auto_boundaries.load()},
              {"boundary_source", cb->boundary_source.load() == 2   ? "inferred"
                                  : cb->boundary_source.load() == 1 ? "explicit"
                                                                    : "none"},
              {"swap_state", cb->swap_state.load() == runtime::kSwapSwappedOut ? "swapped_out"
                             : cb->swap_state.load() == runtime::kSwapFailed   ? "swap_failed"
                                                                               : "resident"},
              {"fail_open", cb->fail_open.load() != 0},
              {"exit_code", job.exit_code},
              {"migrated_from", job.migrated_from},
              {"operation", OperationToJson(job.operation)}};
}

StatusOr<Json> Controller::ListJobs(const Json& req) {
  Json list = Json::array();
  if (req.contains("job")) {
    auto it = jobs_.find(req["job"].get<uint64_t>());
    if (it == jobs_.end()) return NotFound("no job " + req["job"].dump());
    list.push_back(JobToJson(*it->second));
  } else {
    for (auto& [id, job] : jobs_) list.push_back(JobToJson(*job));
  }
  return Json{{"jobs", list}};
}

StatusOr<Json> Controller::RegisterJob(const Json& req) {
  std::vector<std::string> command = req.at("command").get<std::vector<std::string>>();
  if (command.empty()) return InvalidArgument("register_job needs a non-empty command");
  double weight = req.value("weight", 1.0);
  if (!(weight > 0 && weight <= 16)) return InvalidArgument("weight must be in (0, 16]");
  std::string device = req.value("device", "");
  if (device.empty()) {
    // The least loaded device.
    size_t best = SIZE_MAX;
    for (auto& [name, dev] : devices_)
      if (dev->slicer.size() < best) best = dev->slicer.size(), device = name;
  }
  Device* dev = FindDevice(device);
  if (!dev) return NotFound("no device '" + device + "' on node " + options_.node);

  GD_ASSIGN_OR_RETURN(auto env, EnvFromRequest(req));

  auto job = std::make_unique<Job>();
  job->id = next_job_id_++;
  job->name = req.value("name", "");
  if (job->name.empty()) job->name = "job" + std::to_string(job->id);
  job->device = device;
  job->weight = weight;
  job->command = std::move(command);
  job->cwd = req.value("cwd", "");
  job->env = std::move(env);
  job->registered_ns = MonotonicNowNs();
  const std::string block_name =
      "/gandiva." + options_.node + "." + std::to_string(getpid()) + "." + std::to_string(job->id);
  GD_ASSIGN_OR_RETURN(job->block, runtime::SharedControlBlock::Create(
                                      block_name, job->id, options_.lease_ms * kMs, options_.node));
  runtime::Heartbeat(job->cb(), MonotonicNowNs());
  runtime::RequestSuspend(job->cb());  // it parks at its first boundary, then queues
  dev->slicer.AddJob(job->id, weight);
  dev->wake.notify_all();
  GD_LOG(kInfo, "job %llu (%s) registered on %s", static_cast<unsigned long long>(job->id),
         job->name.c_str(), device.c_str());
  Json reply = {{"job", job->id},
                {"name", job->name},
                {"device", device},
                {"device_kind", dev->info.kind},
                {"control_block", block_name},
                {"lease_ms", options_.lease_ms}};
  jobs_[job->id] = std::move(job);
  return reply;
}

StatusOr<Json> Controller::JobStarted(const Json& req) {
  GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
  const int64_t pid = req.at("pid").get<int64_t>();
  if (pid <= 0) return InvalidArgument("pid must be positive");
  if (job->pid != 0)
    return FailedPrecondition("job " + std::to_string(job->id) + " already started");
  if (req.contains("env")) {
    GD_ASSIGN_OR_RETURN(job->env, EnvFromRequest(req));
  }
  job->pid = static_cast<int>(pid);
  GD_RETURN_IF_ERROR(WatchProcess(*job));
  return Json::object();
}

Status Controller::WatchProcess(Job& job) {
  job.pidfd = PidfdOpen(job.pid);
  if (job.pidfd < 0) {
    EndJob(job, true, -1);
    return NotFound("process " + std::to_string(job.pid) + " is not running");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = job.id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, job.pidfd, &ev);
  return Status::Ok();
}

StatusOr<Json> Controller::JobExited(const Json& req) {
  const uint64_t id = req.at("job").get<uint64_t>();
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
  const int code = req.at("exit_code").get<int>();
  Job& job = *it->second;
  if (!job.ended) EndJob(job, code != 0, code);
  job.exit_code = code;
  job.failed = code != 0;
  return Json::object();
}

void Controller::SetHeld(Job& job, bool held) {
  job.held = held;
  Device* dev = FindDevice(job.device);
  if (held) {
    dev->slicer.Hold(job.id);
  } else {
    dev->slicer.Release(job.id);
  }
  dev->wake.notify_all();
}

StatusOr<Json> Controller::Suspend(const Json& req) {
  GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
  SetHeld(*job, true);
  return Json{{"state", JobStateName(job->State())}};
}

StatusOr<Json> Controller::Resume(const Json& req) {
  GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
  if (!job->held) return FailedPrecondition("job " + std::to_string(job->id) + " is not suspended");
  if (job->operation && job->operation->state == "running")
    return FailedPrecondition("job " + std::to_string(job->id) + " is in a " +
                              job->operation->kind + "; it resumes when that ends");
  SetHeld(*job, false);
  return Json{{"state", JobStateName(job->State())}};
}

StatusOr<Json> Controller::Kill(const Json& req) {
  GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
  if (job->pid <= 0)
    return FailedPrecondition("job " + std::to_string(job->id) + " has no process yet");
  const int sig = req.value("signal", SIGTERM);
  if (sig <= 0 || sig >= 65) return InvalidArgument("bad signal " + std::to_string(sig));
  if (::kill(job->pid, sig) != 0)
    return NotFound("process " + std::to_string(job->pid) + " is gone");
  return Json::object();
}

StatusOr<Json> Controller::SetSlice(const Json& req) {
  Device* dev = FindDevice(req.at("device").get<std::string>());
  if (!dev) return NotFound("no device '" + req.at("device").get<std::string>() + "'");
  const int64_t ms = req.at("ms").get<int64_t>();
  if (ms < static_cast<int64_t>(kMinSliceMs) || ms > static_cast<int64_t>(kMaxSliceMs))
    return InvalidArgument("slice must be " + std::to_string(kMinSliceMs) + ".." +
                           std::to_string(kMaxSliceMs) + " ms, not " + std::to_string(ms));
  dev->slicer.SetSlice(static_cast<uint64_t>(ms) * kMs);
  dev->wake.notify_all();
  return Json::object();
}

StatusOr<Json> Controller::SetWeight(const Json& req) {
  GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
  const double w = req.at("weight").get<double>();
  if (!(w > 0 && w <= 16)) return InvalidArgument("weight must be in (0, 16]");
  job->weight = w;
  FindDevice(job->device)->slicer.SetWeight(job->id, w);
  return Json::object();
}

StatusOr<Json> Controller::AssignDevice(const Json& req) {
  GD_ASSIGN_OR_RETURN(Job * job, LiveJob(req));
  Device* to = FindDevice(req.at("device").get<std::string>());
  if (!to) return NotFound("no device '" + req.at("device").get<std::string>() + "'");
  Device* from = FindDevice(job->device);
  if (to == from) return Json::object();
  if (job->operation && job->operation->state == "running")
    return FailedPrecondition("job " + std::to_string(job->id) + " is in a " +
                              job->operation->kind);
  if (job->running_since_ns) {
    job->device_time_ns += MonotonicNowNs() - job->running_since_ns;
    job->running_since_ns = 0;
  }
  from->slicer.RemoveJob(job->id);
  if (from->last_parked_job == job->id) from->last_parked_job = 0;
  from->wake.notify_all();
  // On the new device it parks at its next boundary and queues there.
  job->device = to->info.name;
  to->slicer.AddJob(job->id, job->weight);
  if (job->held) to->slicer.Hold(job->id);
  to->wake.notify_all();
  return Json::object();
}

StatusOr<Json> Controller::ListSwitches(const Json& req) {
  const std::string only = req.value("device", "");
  if (!only.empty() && !FindDevice(only)) return NotFound("no device '" + only + "'");
  const int64_t limit = req.value("limit", int64_t{1000});
  Json list = Json::array();
  for (auto& [name, dev] : devices_) {
    if (!only.empty() && name != only) continue;
    CompletePendingSwitch(*dev);
    size_t start = dev->switches.size() > static_cast<size_t>(std::max<int64_t>(limit, 0))
                       ? dev->switches.size() - limit
                       : 0;
    for (size_t i = start; i < dev->switches.size(); ++i) {
      const SwitchRecord& s = dev->switches[i];
      list.push_back({{"device", s.device},
                      {"from", s.from},
                      {"to", s.to},
                      {"at_s", s.at_ns / 1e9},
                      {"handover_ms", s.handover_ns / 1e6}});
    }
  }
  return Json{{"switches", list}};
}

}  // namespace gandiva::controller
