// LiveCluster's failure handling (live_cluster.h): a run that ended badly is
// classified from its node's report and the tail of its output
// (exit_class.h); infrastructure failures and preemptions go back to the
// queue after a growing wait, at most retry.max_retries times; anything else
// ends the job with its cause. Also the hand-over of queued jobs to the
// policy (TakeArrivals), which is where a job waiting to retry comes back.
#include <algorithm>

#include "gandiva/common/log.h"
#include "live/live_cluster.h"

namespace gandiva::sched::live {

using protocol::Json;
using protocol::MessageType;

namespace {

// How much of a failed run's output is read to classify it: a Python
// traceback with its chained causes fits, and the read stays one small reply.
constexpr int64_t kStderrTail = 16 * 1024;
constexpr int64_t kStdoutTail = 4 * 1024;

// The last bytes of one of a launched run's logs ("" when the node has none
// or does not answer: the classification then goes by the exit alone).
std::string LogTail(const NodeApi& nodes, int node, int64_t node_job, const char* stream,
                    int64_t bytes) {
  auto size = nodes.Call(node, MessageType::kReadLog,
                         {{"job", node_job}, {"stream", stream}, {"max_bytes", 1}});
  if (!size.ok() || !size->contains("end_offset")) return "";
  const int64_t end = (*size)["end_offset"].get<int64_t>();
  auto tail = nodes.Call(node, MessageType::kReadLog,
                         {{"job", node_job},
                          {"stream", stream},
                          {"offset", std::max<int64_t>(0, end - bytes)},
                          {"max_bytes", bytes}});
  if (!tail.ok() || !tail->contains("data")) return "";
  return (*tail)["data"].get<std::string>();
}

}  // namespace

void LiveCluster::Report(JobId job, std::vector<JobId>& out) {
  Job& j = jobs_[job];
  if (!j.offered) return;
  j.offered = false;
  out.push_back(job);
}

std::vector<JobId> LiveCluster::TakeArrivals() {
  std::vector<JobId> due, still_waiting;
  const double now = wall();
  for (JobId id : waiting_) {
    Job& j = jobs_[id];
    // Cancelled meanwhile, or queued twice (a retry of a job that waited).
    if (j.record.state != LiveJobState::kQueued || j.offered) continue;
    if (j.record.not_before > now) {
      still_waiting.push_back(id);
      continue;
    }
    j.offered = true;
    due.push_back(id);
  }
  waiting_ = std::move(still_waiting);
  return due;
}

std::string LiveCluster::OutputTail(int node, int64_t node_job) const {
  if (node < 0 || node_job <= 0) return "";
  return LogTail(*nodes_, node, node_job, "stderr", kStderrTail) + "\n" +
         LogTail(*nodes_, node, node_job, "stdout", kStdoutTail);
}

Classified LiveCluster::ClassifyEnd(JobId job, const Json& nj) {
  const Job& j = jobs_[job];
  RunEnd end;
  end.reason = nj.value("exit_reason", std::string("exited"));
  end.exit_code = nj.value("exit_code", -1);
  end.signal = nj.value("exit_signal", 0);
  end.detail = nj.value("exit_detail", std::string());
  end.detached = nj.value("state", std::string()) == "exited";
  end.output_tail = OutputTail(NodeIndex(j.record.node), j.record.node_job);
  return ClassifyRunEnd(end);
}

void LiveCluster::Fail(JobId job, const Classified& why, int exit_code, ClusterEvents& events) {
  Job& j = jobs_[job];
  j.record.failure = why.failure;
  if (IsRetryable(why.failure) && j.record.retries < options_.retry.max_retries) {
    Retry(job, why.cause, events);
    return;
  }
  std::string detail = std::string(FailureClassName(why.failure)) + " error: " + why.cause;
  if (IsRetryable(why.failure))
    detail = "gave up after " + std::to_string(j.record.retries) + " retries: " + why.cause;
  if (j.record.state == LiveJobState::kValidating) {
    ++counters_.failed_validation;
    detail += " (in its validation run)";
  }
  GD_LOG(kWarn, "job %d failed: %s", job + 1, detail.c_str());
  Finish(job, LiveJobState::kFailed, exit_code, detail);
  Report(job, events.finished);
}

// Queued again after its wait; a job still in validation validates again.
// For the policy the job has finished; it arrives again, through
// TakeArrivals, once the wait is over.
void LiveCluster::Retry(JobId job, const std::string& why, ClusterEvents& events) {
  Job& j = jobs_[job];
  j.record.retries += 1;
  const double delay = RetryDelay(options_.retry, j.record.retries);
  j.record.not_before = wall() + delay;
  ++counters_.retries;
  const std::string detail = "retry " + std::to_string(j.record.retries) + " of " +
                             std::to_string(options_.retry.max_retries) + " after " +
                             std::to_string(static_cast<int>(delay)) + " s: " + why;
  GD_LOG(kWarn, "job %d: %s", job + 1, detail.c_str());
  if (j.record.state == LiveJobState::kValidating) {
    j.record.detail = detail;
    ClearRun(job);
    SaveBestEffort(job);
    return;
  }
  j.pending_since = Now();
  ToQueue(job, detail);
  waiting_.push_back(job);
  Report(job, events.finished);
}

}  // namespace gandiva::sched::live
