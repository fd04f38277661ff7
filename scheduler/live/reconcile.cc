// LiveCluster::Refresh and Recover's adoption: what the nodes report becomes
// the cluster's state (live_cluster.h). A node is the truth about its jobs:
// ended ones finish here, migrations (followed in moves.cc) and checkpoints
// are taken in, a node silent for node_dead_after_s loses its jobs back to
// the queue, and a job of ours a node runs that is not the job's current
// attempt (left over from before a requeue) is killed, so no job ever runs
// twice.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include "gandiva/common/log.h"
#include "live/live_cluster.h"
#include "live/node_runs.h"

namespace gandiva::sched::live {

using protocol::Json;
using protocol::MessageType;

namespace {

// An entry of a list_jobs reply read by itself (at a restart, not every pass).
bool LiveEntry(const Json& nj) { return LiveOnNode(nj["state"].get_ref<const std::string&>()); }

// "<name>.s<id>.a<attempt>" -> (id, attempt); nullopt for names not ours.
std::optional<std::pair<int64_t, int>> ParseLaunchName(const std::string& name) {
  const size_t a = name.rfind(".a");
  const size_t s = name.rfind(".s", a);
  if (a == std::string::npos || s == std::string::npos) return std::nullopt;
  int64_t id = 0;
  int attempt = 0;
  const char* id_end = name.data() + a;
  auto r1 = std::from_chars(name.data() + s + 2, id_end, id);
  auto r2 = std::from_chars(name.data() + a + 2, name.data() + name.size(), attempt);
  if (r1.ec != std::errc() || r1.ptr != id_end || r2.ec != std::errc() ||
      r2.ptr != name.data() + name.size())
    return std::nullopt;
  return std::make_pair(id, attempt);
}

}  // namespace

LiveCluster::NodeReports LiveCluster::PollNodes() const {
  NodeReports reports;
  for (int n = 0; n < nodes_->size(); ++n)
    reports.push_back(nodes_->Call(n, MessageType::kListJobs));
  return reports;
}

ClusterEvents LiveCluster::Refresh(const NodeReports& reports) {
  ClusterEvents events;
  const double now = wall();
  // The live jobs by the node they are on (or migrate from): one walk over the
  // jobs not ended, not one per node; the ones that ended since leave live_.
  std::vector<std::vector<JobId>> on_node(nodes_->size());
  size_t kept = 0;
  for (JobId id : live_) {
    const Job& j = jobs_[id];
    if (IsEnded(j.record.state)) continue;
    live_[kept++] = id;
    const int n = NodeIndex(Moving(j) ? j.record.move->from_node : j.record.node);
    if (n >= 0) on_node[n].push_back(id);
  }
  live_.resize(kept);
  for (int n = 0; n < nodes_->size(); ++n) {
    const auto& reply = reports[n];
    if (!reply.ok()) {
      if (node_up_[n] && now - node_last_seen_[n] >= options_.node_dead_after_s) {
        GD_LOG(kWarn, "node %s is down: %s", nodes_->address(n).name.c_str(),
               reply.status().message().c_str());
        NodeDown(n, events);
      }
      continue;
    }
    node_last_seen_[n] = now;
    if (!node_up_[n]) NodeUp(n);
    RefreshNode(n, (*reply)["jobs"], on_node[n], reports, events);
  }
  return events;
}

void LiveCluster::RefreshNode(int n, const Json& node_jobs, const std::vector<JobId>& ours,
                              const NodeReports& reports, ClusterEvents& events) {
  const std::string& name = nodes_->address(n).name;
  const NodeRuns runs(node_jobs);
  for (JobId id : ours) {
    Job& j = jobs_[id];
    if (Moving(j)) {  // followed on its source, the node `ours` is of
      RefreshMove(id, n, runs, reports, events);
      continue;
    }
    if (j.record.node != name || j.record.node_job == 0) continue;
    if (j.record.state != LiveJobState::kRunning && j.record.state != LiveJobState::kSuspended &&
        j.record.state != LiveJobState::kValidating)
      continue;
    const NodeRun* run = runs.Find(j.record.node_job);
    if (!run) {
      Fail(id,
           {FailureClass::kInfrastructure, name + " does not know its job " +
                                               std::to_string(j.record.node_job) +
                                               " any more (gandivad restarted?)"},
           -1, events);
      continue;
    }
    if (j.record.state == LiveJobState::kValidating) {
      TakeInValidation(id, *run, events);
      continue;
    }
    TakeInJob(id, *run, events);
  }
  // Runs of ours that are not their job's current one: left-overs of earlier
  // attempts (a requeue while the node was unreachable) and parked runs that
  // StopParked just took off their node.
  for (const NodeRun& run : runs.all()) {
    if (!run.live) continue;
    const Json& nj = *run.entry;
    auto ours = ParseLaunchName(nj["name"].get_ref<const std::string&>());
    if (!ours || ours->first < 1 || ours->first > num_jobs()) continue;
    const Job& j = jobs_[ours->first - 1];
    const bool current =
        j.record.attempt == ours->second &&
        ((j.record.node == name && (j.record.node_job == 0 || j.record.node_job == run.id)) ||
         (Moving(j) && j.record.move->from_node == name));
    if (current && state(ours->first - 1) != JobState::kFinished) continue;
    GD_LOG(kWarn, "killing %s on %s: not the current run of job %lld",
           nj["name"].get<std::string>().c_str(), name.c_str(),
           static_cast<long long>(ours->first));
    KillBestEffort(n, run.id);
  }
}

// Its rate against its speed alone, measured, or none (MeasuredRate then
// takes it as 1.0 and RateMeasured says so). A pass reads no field it does
// not use (node_runs.h): alone_ms and ewma_ms only where they are needed.
void LiveCluster::ReadRate(JobId id, const Json& nj) {
  Job& j = jobs_[id];
  const Json& rate = nj["rate_vs_alone"];
  if (rate.is_null())
    j.rate.reset();
  else
    j.rate = rate.get<double>();
  if (j.gpus.empty()) return;
  const auto ewma_ms = [&nj]() -> double {
    auto ewma = nj.find("ewma_ms");
    return ewma != nj.end() && ewma->is_number() ? ewma->get<double>() : 0;
  };
  // Grown or shrunk, its rate is against its speed alone on as many devices
  // as it asked for (the policy's 1.0, read by RestartOn), not against its
  // speed alone on its devices now (1.0 whatever their number): what tells
  // the policy whether growing paid.
  if (j.base_alone_ms > 0 && RunDevices(j) != j.info.num_gpus) {
    if (const double ewma = ewma_ms(); ewma > 0) j.rate = j.base_alone_ms / ewma;
    return;
  }
  if (j.info.job_type < 0 || RunDevices(j) != j.info.num_gpus) return;
  // Built only where it is used: most jobs in a pass need neither.
  const auto kind = [&] {
    return std::tuple<int, int, int>{j.info.job_type, topology_.gpu_type_of(j.gpus[0]),
                                     j.info.num_gpus};
  };
  if (j.rate) {  // its node knows its alone time: its kind's now (once a job)
    if (!j.gave_kind_alone)
      if (auto alone = nj.find("alone_ms");
          alone != nj.end() && alone->is_number() && alone->get<double>() > 0) {
        kind_alone_ms_[kind()] = alone->get<double>();
        j.gave_kind_alone = true;
      }
    return;
  }
  // Packed since it started, it was never alone: its node cannot say how fast
  // it runs against alone, and a pack trial judged on the 1.0 assumed for it
  // would keep any pair. Its kind's alone time against its iteration time now
  // is its rate, while it never waits for a turn (no more jobs than the
  // device runs at once).
  const int group = group_of(id);
  if (group == kNoGroup || modes_[group] != ShareMode::kPack ||
      static_cast<int>(members_[group].size()) > options_.pack_capacity)
    return;
  if (auto alone = kind_alone_ms_.find(kind()); alone != kind_alone_ms_.end())
    if (const double ewma = ewma_ms(); ewma > 0) j.rate = alone->second / ewma;
}

void LiveCluster::TakeInJob(JobId id, const NodeRun& run, ClusterEvents& events) {
  Job& j = jobs_[id];
  const Json& nj = *run.entry;
  // Its service as the node measured it, read before an end is handled: a job
  // that ran and ended between two passes is first seen ended, and its time
  // counts all the same.
  j.device_time_s = nj["device_time_s"].get<double>();
  j.wall_time_s = nj["wall_time_s"].get<double>();
  // Ended once the node knows how.
  if (run.ended()) {
    TakeInEnd(id, nj, events);
    return;
  }
  // Cancelled while it was moving (no node id to signal then), or a kill that
  // did not arrive: signal it again until it ends.
  if (j.record.cancel_requested) KillBestEffort(NodeIndex(j.record.node), j.record.node_job);
  // Device memory is read only where the device has a known size, the one
  // PairFitsMemory compares it with.
  if (!j.gpus.empty() && devices_[j.gpus[0]].memory_bytes > 0)
    if (auto bytes = nj.find("device_bytes"); bytes != nj.end() && bytes->is_number()) {
      j.device_bytes = std::max(j.device_bytes, bytes->get<int64_t>());
      if (j.info.job_type >= 0) {
        int64_t& kind = kind_device_bytes_[j.info.job_type];
        kind = std::max(kind, j.device_bytes);
      }
    }
  ReadRate(id, nj);
  if (auto w = nj.find("boundary_warning"); w != nj.end() && w->is_string())
    j.boundary_warning = w->get<std::string>();
  // Its operation is read only while a checkpoint of ours is under way (all
  // TakeInCheckpoint looks for).
  if (!j.checkpointing.empty()) {
    const std::string asked = j.checkpointing;
    if (TakeInCheckpoint(id, nj["operation"])) {
      if (j.resizing) {
        // Complete: it starts again on its new devices from it. Failed: it
        // restarts from its latest earlier checkpoint, wherever the policy says.
        if (j.record.checkpoint_dir == asked) {
          Relaunch(id);
        } else {
          Requeue(id, "its checkpoint to resize failed");
          events.requeued.push_back(id);
        }
        return;
      }
      if (j.stop_when_checkpointed) {
        StopParked(id);
        return;
      }
    }
  }
  MaybeCheckpoint(id);
}

void LiveCluster::TakeInEnd(JobId id, const Json& nj, ClusterEvents& events) {
  Job& j = jobs_[id];
  const bool validating = j.record.state == LiveJobState::kValidating;
  const int code = nj["exit_code"].get<int>();
  if (j.record.cancel_requested) {
    Finish(id, LiveJobState::kCancelled, code,
           validating ? "cancelled in validation" : "cancelled");
  } else if (nj["exit_reason"] == "exited" && code == 0) {
    // Success is an exit status of 0 (the node's "failed" also covers a job
    // that ended without detaching from its control block, which a job may).
    // A job shorter than its validation is done in it.
    if (validating) ++counters_.validated;
    Finish(id, LiveJobState::kFinished, 0, validating ? "finished in its validation run" : "");
  } else if (nj["state"] == "migrated") {
    // It runs on, elsewhere, outside this scheduler: not run again here.
    Finish(id, LiveJobState::kFailed, code, "migrated away by someone else");
  } else if (const Classified why = ClassifyEnd(id, nj); why.failure != FailureClass::kNone) {
    Fail(id, why, code, events);  // reports it
    return;
  } else {
    if (validating) ++counters_.validated;
    Finish(id, LiveJobState::kFinished, 0, why.cause);  // its exit status was lost
  }
  Report(id, events.finished);  // nothing for a job still in validation: not offered
}

bool LiveCluster::TakeInCheckpoint(JobId id, const Json& op) {
  Job& j = jobs_[id];
  if (j.checkpointing.empty() || op.is_null() || op["kind"] != "checkpoint" ||
      op["target"] != j.checkpointing || op["state"] == "running")
    return false;
  if (op["state"] == "done") {
    const std::string previous = j.record.checkpoint_dir;
    j.record.checkpoint_dir = j.checkpointing;
    j.record.checkpoint_time = wall();
    if (Persist(id).ok() && !previous.empty() && previous != j.record.checkpoint_dir) {
      std::error_code ec;
      std::filesystem::remove_all(previous, ec);  // only the latest is needed
    }
  } else {
    GD_LOG(kWarn, "job %d: checkpoint failed: %s", id + 1, op["error"].get<std::string>().c_str());
    // It stays parked: a stop the policy asked for is asked again a little
    // later (MaybeCheckpoint), one after stop_parked_after_s after a wait.
    if (j.stop_when_checkpointed) j.stop_refused_at = wall();
    j.stop_when_checkpointed = false;
  }
  j.checkpointing.clear();
  return true;
}

// Periodic checkpoints of running restartable jobs, and the checkpoint that
// stops a restartable job parked for stop_parked_after_s.
void LiveCluster::MaybeCheckpoint(JobId id) {
  Job& j = jobs_[id];
  if (!j.record.restartable || Moving(j) || !j.checkpointing.empty()) return;
  if (j.record.state == LiveJobState::kRunning) {
    if (options_.checkpoint_every_s <= 0 ||
        wall() - j.last_checkpoint_asked < options_.checkpoint_every_s)
      return;
    (void)RequestCheckpoint(id);
  } else if (j.record.state == LiveJobState::kSuspended) {
    if (j.stop_wanted) {
      if (wall() - j.stop_refused_at >= kStopRetrySeconds) RequestStopCheckpoint(id);
      return;
    }
    const double wait = options_.stop_parked_after_s;
    // Asked at most once a wait: a node that refuses is not asked every pass.
    if (wait <= 0 || Now() - j.pending_since < wait || wall() - j.last_checkpoint_asked < wait)
      return;
    j.stop_when_checkpointed = RequestCheckpoint(id);
  }
}

void LiveCluster::RequestStopCheckpoint(JobId id) {
  Job& j = jobs_[id];
  j.stop_when_checkpointed = RequestCheckpoint(id);
  if (j.stop_when_checkpointed)
    GD_LOG(kInfo, "job %d: preempted to stop: checkpointing on %s", id + 1, j.record.node.c_str());
  else
    j.stop_refused_at = wall();
}

bool LiveCluster::RequestCheckpoint(JobId id) {
  Job& j = jobs_[id];
  j.last_checkpoint_asked = wall();
  // A new folder each time: a checkpoint that fails never spoils the latest good one.
  const std::string dir = options_.checkpoint_root + "/job-" + std::to_string(j.record.id) + "/" +
                          std::to_string(static_cast<int64_t>(wall() * 1000));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  // The job writes its checkpoint as its user: the folder, made just now in
  // the scheduler's own directory (no one else's link can be there), is theirs.
  if (!ec && j.record.uid >= 0 && lchown(dir.c_str(), static_cast<uid_t>(j.record.uid), -1) != 0)
    GD_LOG(kWarn, "job %d: cannot give %s to uid %lld: %s", id + 1, dir.c_str(),
           static_cast<long long>(j.record.uid), strerror(errno));
  const int n = NodeIndex(j.record.node);
  auto r = nodes_->Call(n, MessageType::kCheckpoint, {{"job", j.record.node_job}, {"dir", dir}});
  if (!r.ok()) {
    GD_LOG(kWarn, "job %d: could not checkpoint: %s", id + 1, r.status().ToString().c_str());
    std::filesystem::remove_all(dir, ec);
    return false;
  }
  ++counters_.checkpoints;
  j.checkpointing = dir;
  return true;
}

void LiveCluster::NodeDown(int n, ClusterEvents& events) {
  node_up_[n] = false;
  const std::string& name = nodes_->address(n).name;
  for (JobId id = 0; id < num_jobs(); ++id) {
    const Job& j = jobs_[id];
    if (j.record.id == 0 || state(id) == JobState::kFinished) continue;
    if (j.record.node == name || (Moving(j) && j.record.move->from_node == name))
      Fail(id, {FailureClass::kInfrastructure, "node " + name + " went down"}, -1, events);
  }
  for (GpuId g = 0; g < topology_.num_gpus(); ++g)
    if (devices_[g].node == n && free_.IsFree(g)) free_.Take(std::span<const GpuId>(&g, 1));
}

void LiveCluster::NodeUp(int n) {
  GD_LOG(kInfo, "node %s is up", nodes_->address(n).name.c_str());
  node_up_[n] = true;
  for (GpuId g = 0; g < topology_.num_gpus(); ++g)
    if (devices_[g].node == n && gpu_group_[g] == kNoGroup && !free_.IsFree(g))
      free_.Release(std::span<const GpuId>(&g, 1));
}

const Json* LiveCluster::FindRun(const Job& j, const Json& node_jobs) const {
  const Json* found = nullptr;
  for (const Json& nj : node_jobs) {
    const bool by_id = j.record.node_job > 0 && nj["id"].get<int64_t>() == j.record.node_job;
    const bool by_name = j.record.node_job == 0 && nj["name"] == LaunchName(j);
    // An ended one too: it ended while the scheduler was away, and the next
    // Refresh finishes it rather than running it again.
    if ((by_id || by_name) && (!found || LiveEntry(nj))) found = &nj;
  }
  return found;
}

void LiveCluster::AdoptOrRequeue(JobId id, const Json& node_jobs, bool node_answered) {
  Job& j = jobs_[id];
  const std::vector<GpuId> gpus = GpusOf(j.record.node, j.record.device);
  if (gpus.empty()) {
    Requeue(id, "its node " + j.record.node + " is not in the cluster now");
    return;
  }
  const Json* found = nullptr;
  if (node_answered) {
    found = FindRun(j, node_jobs);
    if (!found) {
      Requeue(id, "its node " + j.record.node +
                      " does not know it (the scheduler stopped while it started or moved)");
      return;
    }
    j.record.node_job = (*found)["id"].get<int64_t>();
  }
  // Unanswered: kept where the store says until the node is declared down.
  if (j.record.state == LiveJobState::kStarting) j.record.state = LiveJobState::kRunning;
  // A suspend or resume sent in the pass the scheduler died in may not be in
  // the store: the node's word decides, and the job is made to match the store.
  if (found && LiveEntry(*found)) {
    const std::string on_node = (*found)["state"].get<std::string>();
    const bool parked = on_node == "suspended" || on_node == "suspending";
    const int n = NodeIndex(j.record.node);
    if (j.record.state == LiveJobState::kRunning && parked && (*found)["held"] == true)
      (void)nodes_->Call(n, MessageType::kResume, {{"job", j.record.node_job}});
    if (j.record.state == LiveJobState::kSuspended && !parked)
      (void)nodes_->Call(n, MessageType::kSuspend, {{"job", j.record.node_job}});
  }
  if (j.record.state == LiveJobState::kRunning) Place(id, gpus);
  j.last_checkpoint_asked = wall();
  SaveBestEffort(id);
  GD_LOG(kInfo, "job %d: adopted %s's job %lld", id + 1, j.record.node.c_str(),
         static_cast<long long>(j.record.node_job));
}

}  // namespace gandiva::sched::live
