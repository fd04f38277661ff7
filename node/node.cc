// The node's components wired together, and what spans several of them; see node.h.
#include "node.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "api/node_handlers.h"
#include "gandiva/common/clock.h"
#include "gandiva/common/log.h"
#include "gandiva/common/private_files.h"
#include "gandiva/common/units.h"
#include "gandiva/contract/environment.h"
#include "jobs/as_user.h"
#include "jobs/container_peer.h"

namespace gandiva::controller {

namespace {
MigratorOptions MigratorOptionsFor(const NodeOptions& o) {
  MigratorOptions m;
  m.node = o.node;
  m.state_dir = o.state_dir;
  m.peers = o.peers;
  m.bulk_host = o.bulk_host;
  m.has_key = !o.node_keys.secret_key.empty();
  m.timeouts = o.timeouts;
  m.connect = [keys = o.node_keys, timeout = o.peer_timeout_ms,
               fault = o.fault](const PeerInfo& info) -> std::unique_ptr<Peer> {
    auto peer = ConnectPeer(info, keys, timeout);
    if (fault == PeerFault::kNone) return peer;
    return std::make_unique<FaultInjectionPeer>(std::move(peer), fault);
  };
  return m;
}
}  // namespace

Node::Node(NodeOptions options)
    : options_(std::move(options)),
      monitor_([this](uint64_t job) { OnProcessExit(job); }),
      logs_(options_.job_log_cap_bytes),
      boundary_watch_(options_.boundary_wait_ms * kMs),
      heartbeat_(std::chrono::milliseconds(std::max<uint64_t>(10, options_.lease_ms / 4)),
                 [this](uint64_t now) {
                   std::vector<uint64_t> cut_short;
                   std::vector<std::pair<Job, std::string>> no_boundaries;
                   jobs_.ForEachLive([&](const Job& j) {
                     if (!j.cb()) return;
                     if (j.block->cut_short()) cut_short.push_back(j.id);
                     runtime::Heartbeat(j.cb(), now);
                     if (std::string w = boundary_watch_.Note(j, now); !w.empty())
                       no_boundaries.emplace_back(j, std::move(w));
                   });
                   boundary_watch_.EndBeat();
                   for (uint64_t id : cut_short) EndCutShort(id);
                   for (const auto& [job, warning] : no_boundaries) {
                     GD_LOG(kWarn, "job %llu: %s", static_cast<unsigned long long>(job.id),
                            warning.c_str());
                     // It must not keep the jobs sliced on its devices waiting for its park.
                     if (DeviceLoop* dev = FindDevice(job.device)) dev->Unmanage(job.id);
                   }
                 }),
      usage_flush_(std::chrono::seconds(1), [this](uint64_t) { FlushUsage(); }),
      migrator_(this, MigratorOptionsFor(options_)),
      access_(options_.admin_group) {
  for (const auto& d : options_.devices) {
    loops_.push_back(
        std::make_unique<DeviceLoop>(d, options_.slice_ms * kMs, options_.max_switch_records));
    loops_.back()->SetSwitchShare(options_.switch_share);
    devices_[d.name] = loops_.back().get();
  }
  RegisterNodeHandlers(dispatcher_, *this);
  migrator_.RegisterHandlers(dispatcher_);
}

Node::~Node() { Stop(); }

void Node::Handle(Call call, Reply reply) {
  // A job's pid as its caller numbers it (in a container, its own pid
  // namespace's) becomes gandivad's before anything reads it: the access check
  // (a process the caller may signal) and the handler see the same process.
  if (call.request.type == protocol::MessageType::kJobStarted &&
      call.request.body.contains("pid") && call.request.body["pid"].is_number_integer()) {
    const int64_t named = call.request.body["pid"].get<int64_t>();
    if (named > 0 && named <= std::numeric_limits<int>::max()) {
      auto pid = HostPidOf(call.caller.pid, named);
      if (!pid.ok()) return reply(pid.status());
      call.request.body["pid"] = *pid;
    }
  }
  const Status allowed = access_.Authorize(call, [this](uint64_t id) -> std::optional<int64_t> {
    auto job = jobs_.Find(id);
    return job.ok() ? std::optional<int64_t>(job->owner_uid) : std::nullopt;
  });
  if (!allowed.ok()) return reply(allowed);
  dispatcher_.Dispatch(std::move(call), std::move(reply));
}

Status Node::Start() {
  if (devices_.empty()) return InvalidArgument("no devices to schedule");
  // Jobs' blocks belong to their users, who may cut them short under us.
  GD_RETURN_IF_ERROR(runtime::SharedControlBlock::GuardAgainstShrinking());
  GD_RETURN_IF_ERROR(OpenStore());
  GD_RETURN_IF_ERROR(OpenBlocksDir());
  GD_RETURN_IF_ERROR(monitor_.Start());
  cgroups_ = MemoryCgroups::Probe("gandiva." + options_.node + "." + std::to_string(getpid()));
  GD_LOG(kInfo, "memory limits of launched jobs: %s", cgroups_.status().c_str());
  logs_.Start();
  freezer_ = std::make_unique<ProcessFreezer>(options_.freeze_parked);
  for (auto& dev : loops_) {
    dev->SetFreezer(freezer_.get());
    dev->Start();
  }
  bool has_gpu = false;
  for (const auto& d : options_.devices) has_gpu |= d.kind == protocol::DeviceKind::kGpu;
  const char* path = getenv("PATH");
  mps_.Start(PlanMps(has_gpu, path ? path : "", options_.state_dir));
  Readopt();
  heartbeat_.Start();
  usage_flush_.Start();
  started_ = true;
  return Status::Ok();
}

Status Node::OpenBlocksDir() {
  if (options_.state_dir.empty()) return Status::Ok();
  // gandivad's alone to write (no user may put a file or a link there), and
  // every user's to pass through: each block in it is its job's user's, 0600,
  // so a container that mounts the directory reaches only its user's blocks.
  const std::string dir = options_.state_dir + "/blocks";
  auto opened = OpenPrivateDir(dir, 0711, geteuid());
  if (!opened.ok())
    return Status(opened.status().code(), "blocks directory: " + opened.status().message());
  blocks_dir_ = dir;
  return Status::Ok();
}

void Node::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  for (auto& dev : loops_) dev->Stop();
  heartbeat_.Stop();
  usage_flush_.Stop();
  FlushUsage();
  monitor_.Stop();
  logs_.Stop();
  migrator_.Stop();  // operations give up; a job they held is released below
  // With a job table on disk a gandivad started again takes the jobs back: they
  // run on meanwhile (a resume, as their lease would give them) and keep their
  // blocks. Without one, nothing could: they are released for good.
  const bool adoptable = store_ != nullptr;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, gang] : gangs_)  // every rank, before its leader
      adoptable ? gang->ReleaseUntilAdopted() : gang->ReleaseForever();
  }
  int released = 0;
  jobs_.ForEachLive([&](const Job& job) {
    if (!job.cb()) return;
    if (adoptable) {
      // Not a migration's copy that was not handed over: it stays parked.
      // Released, one whose state has not loaded would train from scratch, and
      // one whose state has, before its source ended the job, beside it.
      if (job.arrival != ArrivalStage::kWarming && job.arrival != ArrivalStage::kLoaded)
        runtime::RequestResume(job.cb());
    } else {
      runtime::ReleaseForever(job.cb());
      runtime::SharedControlBlock::Remove(job.block->name());
    }
    ++released;
  });
  if (released)
    GD_LOG(kInfo, "released %d job(s); they run on %s", released,
           adoptable
               ? ("until a gandivad started on " + options_.state_dir + " takes them back").c_str()
               : "unmanaged");
  cgroups_.RemoveParent();  // only once empty: jobs still running keep their cgroups
  mps_.Stop();
}

std::string Node::MpsStatus(const DeviceLoop& device) const {
  if (device.info().kind != protocol::DeviceKind::kGpu) return "off: not a GPU";
  return mps_.Status();
}

std::map<std::string, std::string> Node::JobEnvironment(
    const std::vector<std::string>& devices) const {
  std::vector<const DeviceInfo*> infos;
  for (const std::string& name : devices) infos.push_back(FindDeviceInfo(name));
  const std::string visible = CudaVisibleDevices(infos);
  if (visible.empty()) return {};  // not on GPUs
  // The driver refuses to checkpoint an MPS client (cuCheckpointProcessLock:
  // CUDA_ERROR_NOT_SUPPORTED, driver 580 on an H200): under --release driver jobs
  // get their own contexts, not MPS.
  std::map<std::string, std::string> env;
  if (!options_.release_through_driver) env = mps_.JobEnvironment();
  // Without it, a job on gpu1 would run on the first GPU CUDA shows it.
  env["CUDA_VISIBLE_DEVICES"] = visible;
  // How its shim gives device memory back when asked to swap out (docs/shim.md).
  if (options_.release_through_driver) env["GANDIVA_SHIM_RELEASE"] = "driver";
  return env;
}

const DeviceInfo* Node::FindDeviceInfo(const std::string& name) const {
  for (const DeviceInfo& d : options_.devices)
    if (d.name == name) return &d;
  return nullptr;
}

DeviceLoop* Node::FindDevice(const std::string& name) const {
  std::shared_lock lock(devices_mu_);
  auto it = devices_.find(name);
  return it == devices_.end() ? nullptr : it->second;
}

std::vector<DeviceLoop*> Node::Devices() const {
  std::shared_lock lock(devices_mu_);
  std::vector<DeviceLoop*> all;
  for (const auto& [name, dev] : devices_)
    if (std::find(all.begin(), all.end(), dev) == all.end()) all.push_back(dev);
  return all;
}

std::vector<std::string> Node::DeviceNames() const {
  std::vector<std::string> names;
  for (const auto& d : options_.devices) names.push_back(d.name);
  return names;
}

std::string Node::PickDevice(const std::string& wanted) const {
  if (!wanted.empty()) return wanted;
  return PickDevices(1, "").front();
}

std::vector<std::string> Node::PickDevices(size_t count, const std::string& first) const {
  std::vector<std::string> picked;
  if (!first.empty()) picked.push_back(first);
  // Least loaded first: the jobs on each device (a job across devices counts on each).
  std::vector<std::pair<size_t, std::string>> load;
  for (const std::string& name : DeviceNames())
    if (name != first) load.emplace_back(FindDevice(name)->JobsOn(name), name);
  std::stable_sort(load.begin(), load.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [jobs, name] : load)
    if (picked.size() < count) picked.push_back(name);
  return picked;
}

uint64_t Node::MaskOn(const DeviceLoop& loop, const std::vector<std::string>& devices) {
  uint64_t mask = 0;
  for (const std::string& name : devices)
    if (const int i = loop.IndexOf(name); i >= 0) mask |= uint64_t{1} << i;
  return mask;
}

StatusOr<DeviceLoop*> Node::LoopFor(const std::vector<std::string>& devices) {
  if (devices.empty()) return InvalidArgument("a job needs a device");
  if (devices.size() > 64) return InvalidArgument("a job spans at most 64 devices");
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!FindDevice(devices[i]))
      return NotFound("no device '" + devices[i] + "' on node " + options_.node);
    for (size_t j = 0; j < i; ++j)
      if (devices[j] == devices[i])
        return InvalidArgument("device '" + devices[i] + "' is given twice");
  }
  if (devices.size() == 1) return FindDevice(devices[0]);
  return JoinDevices(devices);
}

StatusOr<DeviceLoop*> Node::JoinDevices(const std::vector<std::string>& devices) {
  DeviceLoop* into = FindDevice(devices[0]);
  std::vector<DeviceLoop*> others;
  for (const std::string& name : devices) {
    DeviceLoop* dev = FindDevice(name);
    if (dev->info().kind != into->info().kind)
      return InvalidArgument("a job's devices must be of one kind: " + devices[0] + " and " + name +
                             " are not");
    if (dev == into || std::find(others.begin(), others.end(), dev) != others.end()) continue;
    others.push_back(dev);
  }
  // Devices sliced together share one share mode: slicing. A device without
  // jobs is simply set to it; one whose jobs pack (or are measured) is not
  // changed under them.
  if (!others.empty()) {
    std::vector<DeviceLoop*> all = others;
    all.push_back(into);
    for (const DeviceLoop* d : all)
      if (d->share_mode() != ShareMode::kSlice && d->size() > 0)
        return FailedPrecondition("device " + d->info().name + " is in " +
                                  std::string(protocol::ToString(d->share_mode())) +
                                  " mode with jobs on it; a job across devices needs them in "
                                  "slice mode");
    for (DeviceLoop* d : all)
      if (d->share_mode() != ShareMode::kSlice)
        d->SetShareMode(ShareMode::kSlice, kDefaultPackCapacity, kDefaultShareWindowMs * kMs);
  }
  for (DeviceLoop* from : others) {
    // Its thread ends and its jobs are continued; they move into `into` with
    // their figures, park at their next boundary there and queue again.
    from->Stop();
    const std::vector<std::string> names = from->DeviceNames();
    for (const std::string& name : names)
      if (const DeviceInfo* d = FindDeviceInfo(name)) into->AddDevice(*d);
    for (uint64_t id : from->JobIds()) {
      const std::vector<std::string> on = from->DevicesOfJob(id);
      const DeviceMember left = from->RemoveJob(id).value_or(DeviceMember{});
      auto job = jobs_.Find(id);
      if (!job.ok() || job->ended) continue;
      into->AddJob(id, job->SharedCb(), job->weight, left.held, left.usage, MaskOn(*into, on));
      into->SetMemoryCap(id, job->GpuMemoryCap());
      into->SetProcess(id, job->pid);
    }
    std::unique_lock lock(devices_mu_);
    for (const std::string& name : names) devices_[name] = into;
  }
  if (!others.empty()) {
    GD_LOG(kInfo, "devices %s are sliced together from now on",
           DeviceListText(into->DeviceNames()).c_str());
  }
  return into;
}

StatusOr<Job> Node::Register(NewJob n) {
  if (n.command.empty()) return InvalidArgument("register_job needs a non-empty command");
  if (!(n.weight > 0 && n.weight <= 16)) return InvalidArgument("weight must be in (0, 16]");
  if (n.ranks < 1 || n.ranks > kMaxRanks)
    return InvalidArgument("ranks must be in 1.." + std::to_string(kMaxRanks));
  std::lock_guard lock(mu_);
  // A bound on what one node holds: each job is a control block, a process
  // watch and a place in a device's rotation.
  const std::vector<Job> live = jobs_.LiveJobs();
  if (live.size() >= options_.max_jobs)
    return ResourceExhausted("node " + options_.node + " runs " + std::to_string(live.size()) +
                             " jobs, its limit (--max-jobs)");
  // And on what one user holds, so that one user cannot take a shared node's places.
  if (options_.max_jobs_per_user && n.owner_uid >= 0) {
    const size_t own = std::count_if(live.begin(), live.end(),
                                     [&](const Job& j) { return j.owner_uid == n.owner_uid; });
    if (own >= options_.max_jobs_per_user)
      return ResourceExhausted("uid " + std::to_string(n.owner_uid) + " runs " +
                               std::to_string(own) + " jobs on node " + options_.node +
                               ", the limit per user (--max-jobs-per-user)");
  }
  const std::vector<std::string> devices =
      n.devices.size() > 1 ? n.devices : std::vector<std::string>{PickDevice(n.device)};
  GD_ASSIGN_OR_RETURN(DeviceLoop * dev, LoopFor(devices));
  const std::string& device = devices.front();
  Job job;
  job.id = jobs_.ReserveId();
  job.name = n.name.empty() ? "job" + std::to_string(job.id) : std::move(n.name);
  job.device = device;
  job.devices = devices;
  job.weight = n.weight;
  job.command = std::move(n.command);
  job.cwd = std::move(n.cwd);
  job.env = std::move(n.env);
  job.migrated_from = std::move(n.migrated_from);
  if (!job.migrated_from.empty()) job.arrival = ArrivalStage::kWarming;
  job.managed_by = std::move(n.managed_by);
  job.owner_uid = n.owner_uid;
  job.registered_ns = MonotonicNowNs();
  // A job in a container has a /dev/shm of its own: its block is a file in the
  // blocks directory, which its container mounts (docs/containers.md).
  if (n.in_container && blocks_dir_.empty())
    return FailedPrecondition(
        "a job in a container needs gandivad's blocks directory (gandivad runs without a "
        "state directory)");
  const std::string block_name = (n.in_container ? blocks_dir_ : std::string()) + "/gandiva." +
                                 options_.node + "." + std::to_string(getpid()) + "." +
                                 std::to_string(job.id);
  // A gang's own block is attached by no process: it stays gandivad's, as what
  // it asks (a transfer's target) is carried out by gandivad (gang.h).
  GD_ASSIGN_OR_RETURN(job.block, runtime::SharedControlBlock::Create(
                                     block_name, job.id, options_.lease_ms * kMs, options_.node,
                                     n.ranks > 1 ? -1 : n.owner_uid));
  runtime::Heartbeat(job.cb(), MonotonicNowNs());
  runtime::RequestSuspend(job.cb());  // it parks at its first boundary, then queues
  job.ranks = n.ranks;
  if (n.ranks > 1) {  // a gang: one block per rank, driven through this one
    auto gang = Gang::Create(job.block, n.ranks, options_.rank_timeout_ms * kMs, n.owner_uid);
    if (!gang.ok()) {
      runtime::SharedControlBlock::Remove(block_name);
      return gang.status();
    }
    (*gang)->Start();
    gangs_[job.id] = std::move(gang).value();
  }
  jobs_.Insert(job);
  // Held at its own request (not as a migration's copy): it stays so across a restart.
  if (store_ && n.held && job.migrated_from.empty()) store_->PutHeld(job.id, true);
  dev->AddJob(job.id, job.SharedCb(), job.weight, n.held, {}, MaskOn(*dev, devices));
  dev->SetMemoryCap(job.id, job.GpuMemoryCap());
  GD_LOG(kInfo, "job %llu (%s) registered on %s%s", static_cast<unsigned long long>(job.id),
         job.name.c_str(), DeviceListText(devices).c_str(),
         n.ranks > 1 ? (", a gang of " + std::to_string(n.ranks) + " ranks").c_str() : "");
  return job;
}

Status Node::SetProcess(uint64_t job, int pid, bool spawned) {
  std::lock_guard lock(mu_);
  GD_RETURN_IF_ERROR(jobs_.SetProcess(job, pid, UniqueFd(), spawned));
  if (auto g = gangs_.find(job); g != gangs_.end()) g->second->SetLauncher(pid);
  auto fd = monitor_.Watch(job, pid);
  if (!fd.ok()) {
    EndJobLocked(job, true, -1,
                 {protocol::ExitReason::kLost, 0, "its process was gone when it was reported"});
    return fd.status();
  }
  GD_RETURN_IF_ERROR(jobs_.SetProcess(job, pid, std::move(*fd), spawned));
  if (auto j = jobs_.Find(job); j.ok())
    if (DeviceLoop* dev = FindDevice(j->device)) dev->SetProcess(job, pid);
  return Status::Ok();
}

Status Node::SetSpawnedProcess(uint64_t job, StartedProcess process) {
  std::lock_guard lock(mu_);
  const int fd = process.pidfd.get();
  GD_RETURN_IF_ERROR(jobs_.SetProcess(job, process.pid, std::move(process.pidfd), true));
  if (auto g = gangs_.find(job); g != gangs_.end()) g->second->SetLauncher(process.pid);
  monitor_.WatchFd(job, fd);  // the table owns the fd now; it outlives the watch
  return Status::Ok();
}

void Node::EndJob(uint64_t job, bool failed, int exit_code, ProcessEnd end) {
  std::lock_guard lock(mu_);
  EndJobLocked(job, failed, exit_code, std::move(end));
}

void Node::EndJobLocked(uint64_t id, bool failed, int exit_code, ProcessEnd end) {
  auto job = jobs_.Find(id);
  if (!job.ok() || job->ended) return;
  DeviceUsage usage;
  if (DeviceLoop* dev = FindDevice(job->device))
    if (auto left = dev->RemoveJob(id)) usage = left->usage;
  if (auto g = gangs_.find(id); g != gangs_.end()) {
    g->second->Finish();  // ranks still alive (a failed or migrated gang) are killed
    const std::string why = g->second->error();
    (void)jobs_.UpdateLive(id, [&](Job& j) {
      j.gang_error = why;
      return Status::Ok();
    });
    if (!why.empty()) {
      failed = true;
      end.detail = why + " (" + end.detail + ")";
    }
  }
  if (auto ended = jobs_.End(id, failed, exit_code, usage, std::move(end)))
    monitor_.Unwatch(ended->pidfd.get());  // then the pidfd closes
  MemoryCgroups::Remove(job->cgroup_dir);  // empty once its process is reaped
}

void Node::OnProcessExit(uint64_t id) {
  // Our child (spawned): its exit status is ours to collect. The pidfd may say
  // it exited a moment before it can be reaped (a many-threaded process is still
  // tearing down), so this waits, outside any lock; called again for a job
  // reaped already, it returns at once (ECHILD).
  int status = 0;
  bool reaped = false;
  if (auto found = jobs_.Find(id); found.ok() && found->spawned && !found->ended) {
    pid_t r;
    while ((r = waitpid(found->pid, &status, 0)) < 0 && errno == EINTR) {
    }
    reaped = r == found->pid;
  }
  std::lock_guard lock(mu_);
  auto job = jobs_.Find(id);
  if (!job.ok() || job->ended) return;
  // Not our child (`gandiva run` is its parent): its exit status comes with job_exited.
  ProcessEnd end{protocol::ExitReason::kLost, 0,
                 "its process ended; no exit status reached gandivad"};
  bool clean = job->cb()->phase.load() == runtime::kPhaseExited;  // it detached
  // A gang: clean only if every rank detached and none failed.
  const auto gang = gangs_.find(id);
  if (gang != gangs_.end()) clean = gang->second->AllExited() && gang->second->error().empty();
  int code = -1;
  if (reaped) {
    end = EndFromWaitStatus(status, &code);
    clean = end.reason == protocol::ExitReason::kExited && code == 0 &&
            (gang == gangs_.end() || gang->second->error().empty());
  }
  if (job->migrated()) {
    EndJobLocked(id, false, 0,
                 {protocol::ExitReason::kMigrated, 0, "it continues on another node"});
    GD_LOG(kInfo, "job %llu (%s) left for another node", static_cast<unsigned long long>(id),
           job->name.c_str());
    return;
  }
  EndJobLocked(id, !clean, code, end);
  if (clean)
    GD_LOG(kInfo, "job %llu (%s) exited", static_cast<unsigned long long>(id), job->name.c_str());
  else
    GD_LOG(kWarn, "job %llu (%s): %s%s", static_cast<unsigned long long>(id), job->name.c_str(),
           end.detail.c_str(), job->spawned ? "" : " (died without detaching)");
}

Status Node::AssignDevice(uint64_t id, const std::string& device) {
  std::lock_guard lock(mu_);
  GD_ASSIGN_OR_RETURN(Job job, jobs_.Live(static_cast<int64_t>(id)));
  DeviceLoop* to = FindDevice(device);
  if (!to) return NotFound("no device '" + device + "'");
  DeviceLoop* from = FindDevice(job.device);
  if (job.devices.size() > 1)
    return FailedPrecondition("job " + std::to_string(id) + " spans " +
                              DeviceListText(job.devices) +
                              "; assign_device moves a job on one device");
  if (job.device == device) return Status::Ok();
  if (auto op = migrator_.OperationOf(id); op && op->state == OperationState::kRunning)
    return FailedPrecondition("job " + std::to_string(id) + " is in a " +
                              std::string(protocol::ToString(op->kind)));
  const DeviceMember left = from->RemoveJob(id).value_or(DeviceMember{});
  GD_RETURN_IF_ERROR(jobs_.UpdateLive(id, [&](Job& j) {
    j.device = device;
    j.devices = {device};
    return Status::Ok();
  }));
  // On the new device it parks at its next boundary and queues there.
  to->AddJob(id, job.SharedCb(), job.weight, left.held, left.usage, MaskOn(*to, {device}));
  to->SetMemoryCap(id, job.GpuMemoryCap());
  to->SetProcess(id, job.pid);
  return Status::Ok();
}

Status Node::SetWeight(uint64_t id, double weight) {
  if (!(weight > 0 && weight <= 16)) return InvalidArgument("weight must be in (0, 16]");
  std::lock_guard lock(mu_);
  std::string device;
  GD_RETURN_IF_ERROR(jobs_.UpdateLive(id, [&](Job& j) {
    j.weight = weight;
    device = j.device;
    return Status::Ok();
  }));
  FindDevice(device)->SetWeight(id, weight);
  return Status::Ok();
}

bool Node::JobHeld(const Job& job) const {
  if (job.ended) return false;
  DeviceLoop* dev = FindDevice(job.device);
  return dev && dev->IsHeld(job.id);
}

std::string Node::GangErrorOf(const Job& job) {
  if (job.ended || job.ranks <= 1) return job.gang_error;
  std::lock_guard lock(mu_);
  auto g = gangs_.find(job.id);
  return g == gangs_.end() ? "" : g->second->error();
}

DeviceUsage Node::UsageOf(const Job& job) const {
  if (job.ended) return job.usage_at_end;
  DeviceLoop* dev = FindDevice(job.device);
  return dev ? dev->Usage(job.id) : DeviceUsage{};
}

// ------------------------------------------------------------ JobHost

StatusOr<MovableJob> Node::LiveJob(int64_t id) {
  GD_ASSIGN_OR_RETURN(Job job, jobs_.Live(id));
  MovableJob movable{job.id,     job.name, job.command,    job.cwd,        job.env,
                     job.weight, job.pid,  job.SharedCb(), job.managed_by, job.owner_uid};
  // The block's name says so, across a restart too (it is in the job table).
  movable.in_container = job.block && runtime::SharedControlBlock::IsFileName(job.block->name());
  return movable;
}

void Node::SetHeld(uint64_t id, bool held) {
  std::lock_guard lock(mu_);
  auto job = jobs_.Live(static_cast<int64_t>(id));
  if (!job.ok()) return;
  if (DeviceLoop* dev = FindDevice(job->device)) dev->SetHeld(id, held);
}

bool Node::IsHeld(uint64_t id) {
  auto job = jobs_.Find(id);
  return job.ok() && JobHeld(*job);
}

void Node::MarkMigrated(uint64_t id, const std::string& to) {
  // Ended or not: should its process have died since the commit, the job is there all the same.
  (void)jobs_.Update(id, [&](Job& j) {
    j.departure = DepartureStage::kCommitted;
    j.migrated_to = to;
  });
}

void Node::MarkHandedOver(uint64_t id) {
  // Its record has ended by now (its process was ended before migrate_start).
  (void)jobs_.Update(id, [](Job& j) {
    if (j.departure == DepartureStage::kCommitted) j.departure = DepartureStage::kHandedOver;
  });
}

Status Node::MarkLoaded(uint64_t id) {
  return jobs_.UpdateLive(id, [](Job& j) {
    if (j.arrival != ArrivalStage::kWarming)
      return FailedPrecondition("job " + std::to_string(j.id) +
                                " is not a warming migration's copy");
    j.arrival = ArrivalStage::kLoaded;
    return Status::Ok();
  });
}

void Node::MarkStarted(uint64_t id) {
  (void)jobs_.UpdateLive(id, [](Job& j) {
    j.arrival = ArrivalStage::kStarted;
    return Status::Ok();
  });
}

ArrivalStage Node::ArrivalStageOf(uint64_t id) {
  auto job = jobs_.Find(id);
  return job.ok() ? job->arrival : ArrivalStage::kNone;
}

void Node::EndMigrated(uint64_t id) {
  EndJob(id, false, 0, {protocol::ExitReason::kMigrated, 0, "it continues on another node"});
}

StatusOr<Arrival> Node::StartArrival(const ArrivingJob& a) {
  NewJob arriving;
  arriving.name = a.name;
  arriving.device = a.device;
  // A job across devices arrives across as many (its environment says how many
  // it had): the one asked for first, then the least loaded.
  if (auto d = a.env.find(runtime::kEnvDevices); d != a.env.end()) {
    const size_t count = std::count(d->second.begin(), d->second.end(), ',') + 1;
    if (count > 1) arriving.devices = PickDevices(count, a.device);
    if (count > 1 && arriving.devices.size() < count)
      return ResourceExhausted("job " + a.name + " spans " + std::to_string(count) +
                               " devices; node " + options_.node + " has " +
                               std::to_string(DeviceNames().size()));
  }
  arriving.weight = a.weight.value_or(1.0);
  arriving.command = a.command;
  arriving.cwd = a.cwd;
  arriving.env = a.env;
  arriving.held = true;
  arriving.migrated_from = a.migrated_from;
  if (a.owner_uid >= 0) {
    // It runs as the user it ran as on its source, who must be one here too.
    if (auto user = CredentialsOf(a.owner_uid); !user.ok())
      return FailedPrecondition("job " + a.name + " runs as uid " + std::to_string(a.owner_uid) +
                                " on its source, which is no user of node " + options_.node);
    arriving.owner_uid = a.owner_uid;
  }
  // A gang arrives as its launcher, started again with the environment it ran
  // with (GANDIVA_RANKS among it); its state is one container for all ranks.
  if (auto r = a.env.find(runtime::kEnvRanks); r != a.env.end())
    arriving.ranks = static_cast<uint32_t>(std::max(1, std::atoi(r->second.c_str())));
  GD_ASSIGN_OR_RETURN(Job job, Register(std::move(arriving)));
  // Held: it parks at its first boundary (warm) and stays there until the state is in;
  // should this node die meanwhile, the copy exits rather than train from scratch.
  job.cb()->exit_if_orphaned.store(1);
  std::map<std::string, std::string> env = job.env;
  env.erase(checkpoint::kEnvRestore);
  if (job.ranks <= 1) env[checkpoint::kEnvArriving] = "1";  // a gang's parts arrive as files
  GD_RETURN_IF_ERROR(StartJobProcess(job, std::move(env), ""));
  GD_ASSIGN_OR_RETURN(job, jobs_.Find(job.id));
  GD_LOG(kInfo, "job %llu arriving from %s: started pid %d (log %s)", (unsigned long long)job.id,
         job.migrated_from.c_str(), job.pid, job.stdout_log.c_str());
  return Arrival{job.id, job.SharedCb(), job.stdout_log};
}

// Its user cut the job's control block short (ftruncate): what we read of it
// from now on is zeros, and the user may not be trusted to park. The job is
// killed and ends failed, saying why; every other job goes on.
void Node::EndCutShort(uint64_t id) {
  auto job = jobs_.Find(id);
  if (!job.ok() || job->ended) return;
  GD_LOG(kWarn, "job %llu (%s): its control block was cut short (by its user); it is killed",
         static_cast<unsigned long long>(id), job->name.c_str());
  (void)KillJob(id);
  EndJob(id, true, 128 + SIGKILL,
         {protocol::ExitReason::kKilled, SIGKILL,
          "killed by gandivad: its control block was cut short by its user"});
}

Status Node::KillJob(uint64_t id) {
  GD_ASSIGN_OR_RETURN(Job job, jobs_.Find(id));
  if (!job.ended && job.pid > 0) (void)jobs_.Signal(id, SIGKILL);  // gone already: nothing to do
  Awaken(job);  // its children, if stopped, go on to notice and end
  std::lock_guard lock(mu_);
  if (auto g = gangs_.find(id); g != gangs_.end() && !job.ended) g->second->KillAll();
  return Status::Ok();
}

Status Node::RequestTransfer(uint64_t id, runtime::Request kind, const std::string& target) {
  std::lock_guard lock(mu_);
  GD_ASSIGN_OR_RETURN(Job job, jobs_.Live(static_cast<int64_t>(id)));
  DeviceLoop* dev = FindDevice(job.device);
  if (!dev) return NotFound("job " + std::to_string(id) + " is on no device");
  return dev->RequestTransfer(id, kind, target);
}

void Node::Awaken(const Job& job) {
  if (DeviceLoop* dev = job.ended ? nullptr : FindDevice(job.device)) dev->Awaken(job.id);
}

}  // namespace gandiva::controller
