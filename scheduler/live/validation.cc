// LiveCluster's pre-run validation (live_cluster.h, --validate N): a newly
// submitted job first runs as a guest on some device, at a small weight
// beside whatever the policy runs there, until it has done N iterations. A job
// that crashes at start (a syntax error, a missing module, a bad argument, no
// memory) thus fails within seconds of its submission, not after it waited
// its turn for a whole device; one that gets through is stopped and queued
// for the policy like any other. Philly (Jeon et al., ATC'19) found that most
// failed jobs fail early and on user errors.
//
// The validation run is not the policy's: it takes no device from it (the
// node time-slices it with the device's jobs) and the policy hears of the job
// only once it is validated. It is stopped, not kept: a restartable job is
// checkpointed first and goes on from there wherever the policy puts it;
// another starts again from the beginning, so its first N iterations run
// twice, the price of learning early.
#include "gandiva/common/log.h"
#include "live/live_cluster.h"

namespace gandiva::sched::live {

using protocol::Json;
using protocol::MessageType;

void LiveCluster::ValidatePending() {
  if (validating_.empty()) return;
  const double now = wall();
  std::erase_if(validating_,
                [this](JobId id) { return jobs_[id].record.state != LiveJobState::kValidating; });
  for (JobId id : validating_) {
    const Job& j = jobs_[id];
    if (!j.record.node.empty() || j.record.not_before > now) continue;
    if (!LaunchValidation(id).ok()) return;  // no device up: the next pass tries again
  }
}

// The least busy device of a node that is up: a free one costs nobody
// anything. Ties go round the devices, so that a burst of submissions does
// not pile onto one.
GpuId LiveCluster::ValidationDevice() {
  const GpuId n = topology_.num_gpus();
  GpuId best = -1;
  for (GpuId k = 0; k < n; ++k) {
    const GpuId g = static_cast<GpuId>((validate_cursor_ + k) % n);
    if (!node_up_[devices_[g].node]) continue;
    if (best < 0 || JobsOnDevice(g) < JobsOnDevice(best)) best = g;
  }
  if (best >= 0) validate_cursor_ = static_cast<size_t>(best + 1);
  return best;
}

Status LiveCluster::LaunchValidation(JobId job) {
  const GpuId gpu = ValidationDevice();
  if (gpu < 0) return Unavailable("no node is up");
  Job& j = jobs_[job];
  const LiveDevice& d = devices_[gpu];
  // Recorded before the node is asked, like every launch: a scheduler that
  // dies in between finds the run by its name (AdoptValidation).
  j.record.attempt += 1;
  j.record.node = nodes_->address(d.node).name;
  j.record.device = d.name;
  j.record.node_job = 0;
  GD_RETURN_IF_ERROR(Persist(job));
  const GpuId on[1] = {gpu};  // a job of several devices validates on one
  Json req = LaunchRequest(j, on);
  req["weight"] = options_.validate_weight;
  auto reply = nodes_->Call(d.node, MessageType::kLaunch, req);
  if (!reply.ok()) {
    ClearRun(job);
    SaveBestEffort(job);
    // Unreachable or busy says nothing of the job: tried again next pass.
    if (!NodeRefusedTheJob(reply.status().code())) return reply.status();
    // The node refused the job itself (no such program, a bad directory).
    ClusterEvents none;
    Fail(job, {FailureClass::kUser, "cannot start: " + reply.status().message()}, 127, none);
    return Status::Ok();
  }
  ++counters_.validations;
  j.record.node_job = (*reply)["job"].get<int64_t>();
  j.device_time_s = j.wall_time_s = 0;
  GD_LOG(kInfo, "job %d: validation run on %s:%s (until %d iterations)", job + 1,
         j.record.node.c_str(), d.name.c_str(), options_.validate_iterations);
  return Persist(job);
}

void LiveCluster::TakeInValidation(JobId job, const NodeRun& run, ClusterEvents& events) {
  Job& j = jobs_[job];
  const Json& nj = *run.entry;
  j.device_time_s = nj["device_time_s"].get<double>();
  j.wall_time_s = nj["wall_time_s"].get<double>();
  if (nj["exit_reason"] != "none") {
    TakeInEnd(job, nj, events);
    return;
  }
  if (j.record.cancel_requested) {
    KillBestEffort(NodeIndex(j.record.node), j.record.node_job);
    return;
  }
  const auto iterations = nj.value("iterations", uint64_t{0});
  const bool enough = iterations >= static_cast<uint64_t>(options_.validate_iterations);
  const std::string how =
      enough ? "validated: " + std::to_string(iterations) + " iterations in " +
                   std::to_string(static_cast<int>(j.wall_time_s)) + " s"
             : "validated: ran " + std::to_string(static_cast<int>(j.wall_time_s)) +
                   " s without failing (" + std::to_string(iterations) + " iterations reported)";
  if (TakeInCheckpoint(job, nj["operation"])) {
    EndValidation(job, how + (j.record.checkpoint_dir.empty() ? "" : "; it goes on from there"));
    return;
  }
  if (!j.checkpointing.empty()) return;  // its first iterations are being saved
  if (!enough && j.wall_time_s < options_.validate_timeout_s) return;
  // A restartable job keeps what its validation run did: it queues once that
  // is checkpointed, and its first run restores it. Others start over.
  if (j.record.restartable && RequestCheckpoint(job)) return;
  EndValidation(job, how);
}

void LiveCluster::EndValidation(JobId job, const std::string& how) {
  Job& j = jobs_[job];
  ++counters_.validated;
  GD_LOG(kInfo, "job %d %s; it queues", job + 1, how.c_str());
  // Its run is no longer the job's current one: RefreshNode's sweep of
  // left-over runs stops it, in this very refresh.
  j.pending_since = Now();
  ToQueue(job, how);
  waiting_.push_back(job);
}

// After a restart: a validation run its node still has is followed again; one
// it does not know (the scheduler died before the launch reached it) is
// launched again; an unanswered node keeps it until it is declared down.
void LiveCluster::AdoptValidation(JobId job, const Json& node_jobs, bool node_answered) {
  Job& j = jobs_[job];
  if (j.record.node.empty() || !node_answered) return;
  const Json* found = FindRun(j, node_jobs);
  if (!found) {
    ClearRun(job);
  } else {
    j.record.node_job = (*found)["id"].get<int64_t>();
  }
  SaveBestEffort(job);
}

void LiveCluster::ClearRun(JobId job) {
  Job& j = jobs_[job];
  KeepRunService(job);  // its service so far is kept
  j.record.node.clear();
  j.record.device.clear();
  j.record.node_job = 0;
}

}  // namespace gandiva::sched::live
