// The job table; see job_table.h.
#include "jobs/job_table.h"

#include "gandiva/common/clock.h"

namespace gandiva::controller {

uint64_t JobTable::ReserveId() {
  std::lock_guard lock(mu_);
  return next_id_++;
}

void JobTable::Insert(Job job) {
  std::lock_guard lock(mu_);
  const uint64_t id = job.id;
  jobs_[id].job = std::move(job);
}

StatusOr<Job> JobTable::Find(uint64_t id) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
  return it->second.job;
}

StatusOr<Job> JobTable::Live(int64_t id) const {
  std::lock_guard lock(mu_);
  auto it = id > 0 ? jobs_.find(static_cast<uint64_t>(id)) : jobs_.end();
  if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
  const Job& job = it->second.job;
  if (job.ended)
    return FailedPrecondition("job " + std::to_string(id) + " has " +
                              std::string(protocol::ToString(job.State())));
  return job;
}

std::vector<Job> JobTable::All() const {
  std::lock_guard lock(mu_);
  std::vector<Job> all;
  all.reserve(jobs_.size());
  for (const auto& [id, e] : jobs_) all.push_back(e.job);
  return all;
}

std::vector<Job> JobTable::LiveJobs() const {
  std::lock_guard lock(mu_);
  std::vector<Job> live;
  for (const auto& [id, e] : jobs_)
    if (!e.job.ended) live.push_back(e.job);
  return live;
}

void JobTable::ForEachLive(const std::function<void(const Job&)>& fn) const {
  std::lock_guard lock(mu_);
  for (const auto& [id, e] : jobs_)
    if (!e.job.ended) fn(e.job);
}

Status JobTable::UpdateLive(uint64_t id, const std::function<Status(Job&)>& update) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
  if (it->second.job.ended) return FailedPrecondition("job " + std::to_string(id) + " has ended");
  return update(it->second.job);
}

Status JobTable::SetProcess(uint64_t id, int pid, UniqueFd pidfd, bool spawned) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.job.ended)
    return FailedPrecondition("job " + std::to_string(id) + " has ended");
  it->second.job.pid = pid;
  it->second.job.spawned = spawned;
  it->second.pidfd = std::move(pidfd);
  return Status::Ok();
}

Status JobTable::SetExitCode(uint64_t id, int exit_code, ProcessEnd end) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
  it->second.job.exit_code = exit_code;
  it->second.job.failed = exit_code != 0;
  it->second.job.end = std::move(end);
  return Status::Ok();
}

std::optional<JobTable::Ended> JobTable::End(uint64_t id, bool failed, int exit_code,
                                             const DeviceUsage& usage, ProcessEnd end) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.job.ended) return std::nullopt;
  Job& job = it->second.job;
  job.ended = true;
  job.failed = failed;
  job.exit_code = exit_code;
  job.end = std::move(end);
  job.ended_ns = MonotonicNowNs();
  job.usage_at_end = usage;
  job.usage_at_end.device_time_ns = usage.DeviceTimeAt(job.ended_ns);
  job.usage_at_end.running_since_ns = 0;
  if (job.block) runtime::SharedControlBlock::Remove(job.block->name());
  Ended ended{job, std::move(it->second.pidfd)};
  ended_.push_back(id);
  for (; ended_.size() > max_ended_; ended_.pop_front()) jobs_.erase(ended_.front());
  return ended;
}

}  // namespace gandiva::controller
