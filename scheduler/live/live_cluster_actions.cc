// LiveCluster's actions: the node calls behind Start, Suspend, Migrate and
// SetShareMode (live_cluster.h). Each writes the job's new state to the store
// before it asks the node, so a scheduler that dies between the two finds out
// on restart what may have happened (Recover).
#include <filesystem>
#include <utility>

#include "gandiva/common/log.h"
#include "live/live_cluster.h"

namespace gandiva::sched::live {

using protocol::Json;
using protocol::MessageType;

namespace {

bool Ended(LiveJobState s) { return IsEnded(s); }

}  // namespace

bool NodeRefusedTheJob(StatusCode code) {
  return code == StatusCode::kNotFound || code == StatusCode::kFailedPrecondition ||
         code == StatusCode::kInvalidArgument || code == StatusCode::kPermissionDenied;
}

Json LiveCluster::LaunchRequest(const Job& j, std::span<const GpuId> gpus) const {
  Json req = {{"command", j.record.command},
              {"cwd", j.record.cwd},
              {"name", LaunchName(j)},
              {"user", j.record.user},
              {"ranks", j.record.ranks}};
  if (gpus.size() == 1) {
    req["device"] = devices_[gpus[0]].name;
  } else {  // one job across them: gandivad slices them together
    req["devices"] = Json::array();
    for (GpuId g : gpus) req["devices"].push_back(devices_[g].name);
  }
  if (!j.record.env.empty()) req["env"] = j.record.env;
  // It runs as its submitter there (the scheduler is an admin to its nodes, so
  // it may name the uid; the node refuses one that is no user there).
  if (j.record.uid >= 0) req["uid"] = j.record.uid;
  return req;
}

Status LiveCluster::Start(JobId job, std::span<const GpuId> gpus) {
  if (job < 0 || job >= num_jobs()) return InvalidArgument("no such job");
  if (state(job) != JobState::kPending) return FailedPrecondition("job is not pending");
  GD_RETURN_IF_ERROR(CheckPlacement(job, gpus));
  // All free (a new group), or exactly one group's devices (it joins the group).
  const int group = gpu_group_[gpus[0]];
  for (GpuId g : gpus)
    if (gpu_group_[g] != group || (group == kNoGroup && !free_.IsFree(g)))
      return FailedPrecondition("device " + devices_[g].name + " is not usable");
  if (group != kNoGroup && group_gpus_[group].size() != gpus.size())
    return FailedPrecondition("the devices are not one group's");
  jobs_[job].offered = true;  // a policy starts only the jobs it knows
  Status s =
      jobs_[job].record.state == LiveJobState::kSuspended ? ResumeOn(job, gpus) : Launch(job, gpus);
  if (!s.ok()) {
    ++counters_.failed_actions;
    GD_LOG(kWarn, "job %d: could not start on %s:%s: %s", job + 1,
           nodes_->address(devices_[gpus[0]].node).name.c_str(), DeviceText(gpus).c_str(),
           s.ToString().c_str());
  }
  return s;
}

// Records the launch (state starting, node, attempt) and takes the device.
// Inside a pass (the store batches its writes) the node is asked only once
// the batch is durable (LaunchPlanned): a restart then always finds a launch
// it may have made. Outside one it is asked at once.
Status LiveCluster::Launch(JobId job, std::span<const GpuId> gpus) {
  Job& j = jobs_[job];
  j.record.attempt += 1;
  j.record.state = LiveJobState::kStarting;
  j.record.node = nodes_->address(devices_[gpus[0]].node).name;
  j.record.device = DeviceText(gpus);
  j.record.node_job = 0;
  GD_RETURN_IF_ERROR(Persist(job));
  Place(job, gpus);
  if (store_->in_batch()) {
    planned_.push_back(job);
    return Status::Ok();
  }
  return SendLaunch(job, /*planned=*/false);
}

void LiveCluster::LaunchPlanned() {
  for (JobId job : std::exchange(planned_, {}))
    if (jobs_[job].record.state == LiveJobState::kStarting) (void)SendLaunch(job, true);
}

void LiveCluster::DropPlanned(const std::string& why) {
  for (JobId job : std::exchange(planned_, {})) {
    Requeue(job, why);
    requeued_by_actions_.push_back(job);
  }
}

Status LiveCluster::SendLaunch(JobId job, bool planned) {
  Job& j = jobs_[job];
  const std::vector<GpuId> gpus = j.gpus;
  const LiveDevice& d = devices_[gpus[0]];
  Json req = LaunchRequest(j, gpus);
  if (j.record.restartable && !j.record.checkpoint_dir.empty())
    req["restore"] = j.record.checkpoint_dir;
  auto reply = nodes_->Call(d.node, MessageType::kLaunch, req);
  if (!reply.ok() && NodeRefusedTheJob(reply.status().code())) {
    // The job itself cannot start there (no such command, a bad restore
    // directory): it fails, as it would anywhere, rather than block the queue.
    j.record.failure = FailureClass::kUser;
    Finish(job, LiveJobState::kFailed, 127,
           "user error: cannot start: " + reply.status().message());
    Report(job, ended_by_actions_);
    return reply.status();
  }
  if (!reply.ok()) {
    // Not started (the node is unreachable or busy) or not known (no reply): a
    // reply lost in flight leaves a job the next Refresh kills as not current
    // (its attempt is then taken again); here it is queued again.
    GD_LOG(kWarn, "job %d: could not start on %s:%s: %s", job + 1,
           nodes_->address(d.node).name.c_str(), DeviceText(gpus).c_str(),
           reply.status().ToString().c_str());
    ++counters_.failed_actions;
    j.record.state = LiveJobState::kQueued;
    j.record.node.clear();
    j.record.device.clear();
    Unplace(job);
    SaveBestEffort(job);
    // A planned launch was a start the policy saw succeed: it ends and arrives again.
    if (planned) requeued_by_actions_.push_back(job);
    return reply.status();
  }
  ++counters_.launches;
  j.record.node_job = (*reply)["job"].get<int64_t>();
  j.record.state = LiveJobState::kRunning;
  if (j.record.start_time == 0) j.record.start_time = wall();
  j.device_time_s = j.wall_time_s = 0;
  j.rate.reset();
  j.last_checkpoint_asked = wall();
  return Persist(job);
}

Status LiveCluster::ResumeOn(JobId job, std::span<const GpuId> gpus) {
  Job& j = jobs_[job];
  const std::vector<GpuId> parked_on = GpusOf(j.record.node, j.record.device);
  if (!std::equal(parked_on.begin(), parked_on.end(), gpus.begin(), gpus.end())) {
    // gandivad moves a job across devices (or to another number of them) by
    // checkpoint and relaunch only: it restarts there from a checkpoint.
    if (gpus.size() > 1 || parked_on.size() > 1) return RestartOn(job, gpus);
    GD_RETURN_IF_ERROR(MoveTo(job, gpus[0]));
  }
  const int n = NodeIndex(j.record.node);
  if (!Moving(j)) {
    auto resumed = nodes_->Call(n, MessageType::kResume, {{"job", j.record.node_job}});
    if (!resumed.ok()) return resumed.status();
    ++counters_.resumes;
  }
  j.record.state = LiveJobState::kRunning;
  j.stop_when_checkpointed = j.stop_wanted = false;  // running again: nothing to stop
  Place(job, gpus);
  return Persist(job);
}

// The parked job's stop checkpoint is complete: it waits in the queue to
// restart from that checkpoint on any device, and its parked run, no longer
// the job's current one, is killed by RefreshNode's sweep of left-over runs
// (in this very refresh, and in every later one until it is gone: also after
// a scheduler restart). For the policy nothing changes: the job was pending
// and still is.
void LiveCluster::StopParked(JobId job) {
  Job& j = jobs_[job];
  j.stop_when_checkpointed = j.stop_wanted = false;
  if (j.record.state != LiveJobState::kSuspended || Moving(j)) return;  // resumed meanwhile
  GD_LOG(kInfo, "job %d: parked on %s for %.0f s: stopped, restarts from %s", job + 1,
         j.record.node.c_str(), Now() - j.pending_since, j.record.checkpoint_dir.c_str());
  ++counters_.stops;
  ToQueue(job, "stopped while parked; restarts from its checkpoint");
}

Status LiveCluster::Suspend(JobId job, Preemption how) {
  if (job < 0 || job >= num_jobs() || jobs_[job].record.state != LiveJobState::kRunning)
    return FailedPrecondition("job is not running");
  Job& j = jobs_[job];
  if (Moving(j)) return FailedPrecondition("job is migrating");
  if (how == Preemption::kStop && !j.record.restartable)
    return FailedPrecondition("job " + std::to_string(job + 1) +
                              " is not restartable: it can be parked, not stopped");
  j.resizing = false;  // a resize under way is dropped: parked already, it stays parked there
  const int n = NodeIndex(j.record.node);
  auto reply = nodes_->Call(n, MessageType::kSuspend, {{"job", j.record.node_job}});
  if (!reply.ok()) {
    ++counters_.failed_actions;
    return reply.status();
  }
  ++counters_.suspends;
  j.record.state = LiveJobState::kSuspended;
  j.pending_since = Now();
  Unplace(job);
  // Stopped once its checkpoint is complete (TakeInCheckpoint). A checkpoint
  // under way (periodic, or the dropped resize's) is of an earlier state: the
  // stop's own is asked when it ends, or, if the node refuses it now, a little
  // later (MaybeCheckpoint).
  if (how == Preemption::kStop) {
    j.stop_wanted = true;
    if (j.checkpointing.empty()) RequestStopCheckpoint(job);
  }
  return Persist(job);
}

Status LiveCluster::Migrate(JobId job, std::span<const GpuId> gpus) {
  if (job < 0 || job >= num_jobs() || jobs_[job].record.state != LiveJobState::kRunning)
    return FailedPrecondition("job is not running");
  if (gpus.size() != 1 || jobs_[job].gpus.size() != 1)
    return InvalidArgument(
        "a live job moves between single devices (a job across devices resizes)");
  const GpuId gpu = gpus[0];
  if (gpu < 0 || gpu >= topology_.num_gpus()) return InvalidArgument("no such device");
  if (!free_.IsFree(gpu)) return FailedPrecondition("the target device is not free");
  if (Moving(jobs_[job]) || jobs_[job].resizing)
    return FailedPrecondition("job is migrating or resizing already");
  Status s = MoveTo(job, gpu);
  if (!s.ok()) {
    ++counters_.failed_actions;
    return s;
  }
  Unplace(job);
  const GpuId to[1] = {gpu};
  Place(job, to);
  return Persist(job);
}

// The job (running or parked) goes to `gpu`: assign_device on its own node,
// migrate to another. A migration runs in the background; Refresh follows it
// on the source (record.move) and learns the job's id on the destination.
// The move is durable before the source is asked (Flush: also in the middle of
// a pass), so a scheduler that dies at any moment after finds it on restart.
Status LiveCluster::MoveTo(JobId job, GpuId gpu) {
  Job& j = jobs_[job];
  const LiveDevice& d = devices_[gpu];
  const int from = NodeIndex(j.record.node);
  if (from == d.node) {
    auto r = nodes_->Call(from, MessageType::kAssignDevice,
                          {{"job", j.record.node_job}, {"device", d.name}});
    if (!r.ok()) return r.status();
    ++counters_.assigns;
    j.record.device = d.name;
    return Status::Ok();
  }
  const JobRecord before = j.record;
  j.record.move = JobMove{j.record.node, j.record.device, j.record.node_job};
  j.record.node = nodes_->address(d.node).name;
  j.record.device = d.name;
  j.record.node_job = 0;  // known once the migration is done
  Status s = Persist(job);
  if (s.ok()) s = store_->Flush();
  if (s.ok()) {
    auto r = nodes_->Call(from, MessageType::kMigrate,
                          {{"job", before.node_job}, {"to", j.record.node}, {"device", d.name}});
    if (!r.ok()) s = r.status();
  }
  if (!s.ok()) {
    // Not asked, or refused: the job stays where it is. (Not followed yet: a
    // reply lost after the source began the move leaves the job recorded
    // here; its run then ends migrated, and the job fails as moved by
    // someone else.)
    j.record = before;
    SaveBestEffort(job);
    return s;
  }
  ++counters_.migrations;
  return Status::Ok();
}

Status LiveCluster::Resize(JobId job, std::span<const GpuId> gpus) {
  if (job < 0 || job >= num_jobs() || jobs_[job].record.state != LiveJobState::kRunning)
    return FailedPrecondition("job is not running");
  Job& j = jobs_[job];
  if (Moving(j) || j.resizing || !j.checkpointing.empty())
    return FailedPrecondition("job is migrating, resizing or checkpointing");
  const int group = group_of(job);
  if (group == kNoGroup || members_[group].size() != 1)
    return FailedPrecondition("only a job alone on its devices can grow or shrink");
  GD_RETURN_IF_ERROR(CheckDevices(gpus));
  const int node = devices_[j.gpus[0]].node;
  if (devices_[gpus[0]].node != node) return InvalidArgument("a job resizes within its node");
  for (GpuId g : gpus)
    if (gpu_group_[g] != group && !free_.IsFree(g))
      return FailedPrecondition("device " + devices_[g].name + " is busy");
  auto parked = nodes_->Call(node, MessageType::kSuspend, {{"job", j.record.node_job}});
  if (!parked.ok()) {
    ++counters_.failed_actions;
    return parked.status();
  }
  if (Status s = RestartOn(job, gpus); !s.ok()) {
    (void)nodes_->Call(node, MessageType::kResume, {{"job", j.record.node_job}});
    ++counters_.failed_actions;
    return s;
  }
  ++counters_.resizes;
  return Status::Ok();
}

// The parked job is checkpointed where it is; Relaunch starts it on `gpus`
// from that checkpoint once it is complete (TakeInJob). Meanwhile it holds
// `gpus` and counts as running, at rate 0 (a restart after a scheduler crash
// finds it parked on its old devices and resumes it there).
Status LiveCluster::RestartOn(JobId job, std::span<const GpuId> gpus) {
  Job& j = jobs_[job];
  if (!j.record.restartable)
    return FailedPrecondition("job " + std::to_string(job + 1) +
                              " is not restartable: it runs only on the devices it has (" +
                              j.record.device + ")");
  if (!j.checkpointing.empty()) return FailedPrecondition("job is checkpointing");
  const int node = NodeIndex(j.record.node);
  // Its speed alone at the size it asked for, the 1.0 of its rate once resized.
  if (RunDevices(j) == j.info.num_gpus) {
    auto listed = nodes_->Call(node, MessageType::kListJobs, {{"job", j.record.node_job}});
    if (listed.ok() && !(*listed)["jobs"].empty())
      if (const Json& alone = (*listed)["jobs"][0]["alone_ms"]; alone.is_number())
        j.base_alone_ms = alone.get<double>();
  }
  if (!RequestCheckpoint(job))
    return Unavailable("job " + std::to_string(job + 1) + " could not be checkpointed");
  GD_LOG(kInfo, "job %d: restarts from %s on %s", job + 1, j.record.device.c_str(),
         DeviceText(gpus).c_str());
  j.resizing = true;
  j.stop_when_checkpointed = j.stop_wanted = false;
  j.record.state = LiveJobState::kRunning;
  Unplace(job);
  Place(job, gpus);
  return Persist(job);
}

void LiveCluster::Relaunch(JobId job) {
  Job& j = jobs_[job];
  j.resizing = false;
  const std::vector<GpuId> gpus = j.gpus;
  // Its parked run is stopped now (RefreshNode's sweep would too: it is not
  // the current run once the attempt below is taken).
  KillBestEffort(NodeIndex(j.record.node), j.record.node_job);
  KeepRunService(job);  // its old run's, on its old devices
  j.rate.reset();
  Unplace(job);
  if (Status s = Launch(job, gpus); !s.ok())
    GD_LOG(kWarn, "job %d: relaunch after resizing: %s", job + 1, s.ToString().c_str());
}

Status LiveCluster::SetShareMode(int group, ShareMode mode) {
  if (group < 0 || group >= topology_.num_gpus() || members_[group].empty())
    return InvalidArgument("no such group");
  const LiveDevice& d = devices_[group];  // gandivad sets it for every device joined with it
  Json req = {{"device", d.name}, {"mode", mode == ShareMode::kPack ? "pack" : "slice"}};
  if (mode == ShareMode::kPack) req["capacity"] = options_.pack_capacity;
  auto r = nodes_->Call(d.node, MessageType::kSetShareMode, req);
  if (!r.ok()) {
    ++counters_.failed_actions;
    return r.status();
  }
  ++counters_.share_changes;
  ++(mode == ShareMode::kPack ? counters_.packs : counters_.unpacks);
  modes_[group] = mode;
  return Status::Ok();
}

void LiveCluster::Finish(JobId job, LiveJobState state, int exit_code, const std::string& detail) {
  Job& j = jobs_[job];
  if (Ended(j.record.state)) return;
  KeepRunService(job);
  j.record.state = state;
  j.record.exit_code = exit_code;
  j.record.detail = detail;
  j.record.end_time = wall();
  j.record.move.reset();
  j.resizing = false;
  Unplace(job);
  SaveBestEffort(job);
}

void LiveCluster::Requeue(JobId job, const std::string& why) {
  Job& j = jobs_[job];
  const std::string from = j.record.restartable && !j.record.checkpoint_dir.empty()
                               ? "from " + j.record.checkpoint_dir
                               : "from the beginning";
  GD_LOG(kWarn, "job %d goes back to the queue: %s (it restarts %s)", job + 1, why.c_str(),
         from.c_str());
  ++counters_.requeues;
  j.pending_since = Now();
  ToQueue(job, why);
}

// The job leaves its node (its service so far kept) and is queued; stored.
void LiveCluster::ToQueue(JobId job, const std::string& detail) {
  Job& j = jobs_[job];
  KeepRunService(job);
  j.rate.reset();
  j.record.move.reset();
  j.resizing = false;
  j.checkpointing.clear();
  j.record.state = LiveJobState::kQueued;
  j.record.node.clear();
  j.record.device.clear();
  j.record.node_job = 0;
  j.record.detail = detail;
  Unplace(job);
  SaveBestEffort(job);
}

}  // namespace gandiva::sched::live
