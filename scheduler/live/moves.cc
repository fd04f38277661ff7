// Node-to-node moves (live_cluster.h): a migration the scheduler asked for is
// followed on its source node until it ends, also across a restart of the
// scheduler, since the move is stored with the job (JobRecord::move) before
// the source is asked. What the source reports decides, in this order:
//
//   its migrate operation is done        the job is its copy on the destination
//   its migrate operation is running     wait: warming up, streaming, or its job
//                                        ended there and migrate_start is sent
//                                        until the destination answers
//   its job is still there (the operation failed, or there is none: the
//   scheduler stopped before it asked)   the job stays there, parked
//   its job ended there, not migrated    the job ended as it did there
//   its job is gone, or ended migrated with no operation left to say so
//                                        the destination's copy (by its launch
//                                        name and migrated_from) is the job
//
// A copy arriving on the destination is never resumed by the scheduler: only
// its source's migrate_start releases it (a destination refuses the resume of
// a copy whose state has not loaded). So a restarted scheduler neither loses
// the job, nor counts it ended, nor runs it twice.
#include <string>
#include <vector>

#include "gandiva/common/log.h"
#include "live/live_cluster.h"

namespace gandiva::sched::live {

using protocol::Json;
using protocol::MessageType;

void LiveCluster::RefreshMove(JobId id, int n, const NodeRuns& runs, const NodeReports& reports,
                              ClusterEvents& events) {
  Job& j = jobs_[id];
  const JobMove move = *j.record.move;
  const NodeRun* src = runs.Find(move.from_job);
  const Json* op = nullptr;
  if (src) {
    const Json& o = (*src->entry)["operation"];
    if (!o.is_null() && o["kind"] == "migrate") op = &o;
    // The source run's service so far, kept when the move ends (EndMove).
    j.device_time_s = (*src->entry)["device_time_s"].get<double>();
    j.wall_time_s = (*src->entry)["wall_time_s"].get<double>();
  }
  const std::string op_state = op ? (*op)["state"].get<std::string>() : "";
  const std::string from = "its migration from " + move.from_node;
  if (op_state == "done") {
    EndMove(id, (*op)["to_job"].get<int64_t>());
    return;
  }
  if (op_state == "running") return;
  if (src && src->live) {
    MoveBack(id, n,
             op ? from + " failed: " + (*op)["error"].get<std::string>()
                : from + " never began (the scheduler stopped before it asked)",
             events);
    return;
  }
  if (src && (*src->entry)["state"] != "migrated") {
    // It ended on its source before the move could (a job finishing while
    // its migration starts): it ends as it ended there, and is not run
    // again. Its exit status follows its end by a moment.
    if (!src->ended()) return;
    j.record.move.reset();
    j.record.node = move.from_node;
    j.record.device = move.from_device;
    j.record.node_job = move.from_job;
    TakeInJob(id, *src, events);
    return;
  }
  if (op_state == "failed") {
    // Its state left the source but the copy never started (migrate_start
    // unanswered for minutes): only the source may release that copy. The
    // job goes back to the queue; the copy, no run of the job's now, is
    // killed by the sweep of left-over runs.
    Requeue(id, from + " failed: " + (*op)["error"].get<std::string>());
    events.requeued.push_back(id);
    return;
  }
  // The source no longer says how the move went (a gandivad restarted since):
  // the destination's copy, if it has one, is the job.
  const int dest = NodeIndex(j.record.node);
  if (dest < 0 || !reports[dest].ok()) return;  // asked again next pass (or the node goes down)
  if (const int64_t copy = FindCopy(j, (*reports[dest])["jobs"]); copy > 0) {
    EndMove(id, copy);
    return;
  }
  Requeue(id, from + " failed: job gone");
  events.requeued.push_back(id);
}

void LiveCluster::EndMove(JobId id, int64_t to_job) {
  Job& j = jobs_[id];
  GD_LOG(kInfo, "job %d: moved from %s to %s:%s (job %lld there)", id + 1,
         j.record.move->from_node.c_str(), j.record.node.c_str(), j.record.device.c_str(),
         static_cast<long long>(to_job));
  j.record.move.reset();
  j.record.node_job = to_job;
  // The source run's service (as last read) is kept: the destination counts
  // its run from zero. Dropped, a migrated job looked new to the
  // attained-service policies.
  KeepRunService(id);
  SaveBestEffort(id);
}

// The policy had placed the job on the destination and may have given its
// source device to another job since: on its source it is parked, not left
// running, and it goes back to the policy as a parked job (the policy resumes
// it there or moves it again). Nothing of its training is lost.
void LiveCluster::MoveBack(JobId id, int n, const std::string& why, ClusterEvents& events) {
  Job& j = jobs_[id];
  const JobMove move = *j.record.move;
  j.record.move.reset();
  j.record.node = move.from_node;
  j.record.device = move.from_device;
  j.record.node_job = move.from_job;
  Unplace(id);  // the destination's device, which it never reached
  events.requeued.push_back(id);
  auto parked = nodes_->Call(n, MessageType::kSuspend, {{"job", move.from_job}});
  if (!parked.ok()) {
    ++counters_.failed_actions;
    KillBestEffort(n, move.from_job);
    Requeue(id, why + "; it could not be parked on " + move.from_node + ": " +
                    parked.status().message());
    return;
  }
  ++counters_.suspends;
  GD_LOG(kWarn, "job %d: %s: parked there, it waits for the policy", id + 1, why.c_str());
  j.record.state = LiveJobState::kSuspended;
  j.pending_since = Now();
  SaveBestEffort(id);
}

int64_t LiveCluster::FindCopy(const Job& j, const Json& node_jobs) const {
  // migrated_from is "<source>/<its id there>"; the launch name carries the
  // job's id and attempt, so a copy of another job or attempt never matches.
  const std::string suffix = "/" + std::to_string(j.record.move->from_job);
  const std::string name = LaunchName(j);
  for (const Json& nj : node_jobs) {
    if (nj["name"] != name) continue;
    const std::string from = nj.value("migrated_from", std::string());
    if (from.size() > suffix.size() && from.ends_with(suffix)) return nj["id"].get<int64_t>();
  }
  return 0;
}

void LiveCluster::AdoptMove(JobId id) {
  Job& j = jobs_[id];
  const JobMove& move = *j.record.move;
  // A move is always toward a run there (Migrate, or ResumeOn of a parked
  // job), whose state "running" the scheduler may not have written yet.
  j.record.state = LiveJobState::kRunning;
  const std::vector<GpuId> gpus = GpusOf(j.record.node, j.record.device);
  if (gpus.empty() || NodeIndex(move.from_node) < 0) {
    // Its run, no longer the job's current one, is killed where it is found.
    Requeue(id, "it was moving from " + move.from_node + " to " + j.record.node +
                    ", and they are not both in the cluster now");
    return;
  }
  GD_LOG(kInfo,
         "job %d: was moving from %s (job %lld) to %s:%s; the nodes' reports finish the move",
         id + 1, move.from_node.c_str(), static_cast<long long>(move.from_job),
         j.record.node.c_str(), j.record.device.c_str());
  Place(id, gpus);
  j.last_checkpoint_asked = wall();
  SaveBestEffort(id);
}

}  // namespace gandiva::sched::live
