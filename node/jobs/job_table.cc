// The job table; see job_table.h.
#include "jobs/job_table.h"

#include <algorithm>

#include "gandiva/common/clock.h"
#include "jobs/process_identity.h"

namespace gandiva::controller {

uint64_t JobTable::ReserveId() {
  std::lock_guard lock(mu_);
  return next_id_++;
}

void JobTable::Insert(Job job) {
  std::lock_guard lock(mu_);
  const uint64_t id = job.id;
  Persist(job);
  jobs_[id].job = std::move(job);
}

void JobTable::Restore(Job job, UniqueFd pidfd) {
  std::lock_guard lock(mu_);
  const uint64_t id = job.id;
  next_id_ = std::max(next_id_, id + 1);
  Persist(job);
  if (job.ended) ended_.push_back(id);  // read back in id order: oldest first
  jobs_[id] = Entry{std::move(job), std::move(pidfd)};
  DropOldEnded();
}

void JobTable::DropOldEnded() {
  for (; ended_.size() > max_ended_; ended_.pop_front()) {
    jobs_.erase(ended_.front());
    if (store_) store_->Erase(ended_.front());
  }
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
  Status s = update(it->second.job);
  Persist(it->second.job);
  return s;
}

Status JobTable::Update(uint64_t id, const std::function<void(Job&)>& update) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
  update(it->second.job);
  Persist(it->second.job);
  return Status::Ok();
}

Status JobTable::SetProcess(uint64_t id, int pid, UniqueFd pidfd, bool spawned) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.job.ended)
    return FailedPrecondition("job " + std::to_string(id) + " has ended");
  Job& job = it->second.job;
  // Read once its pidfd is open (it pins the process): this start time is that process's.
  if (job.pid != pid || !job.process_start) job.process_start = ProcessStartTicks(pid).value_or(0);
  job.pid = pid;
  job.spawned = spawned;
  it->second.pidfd = std::move(pidfd);
  Persist(job);
  return Status::Ok();
}

Status JobTable::Signal(uint64_t id, int sig) const {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.job.ended)
    return FailedPrecondition("job " + std::to_string(id) + " has ended");
  if (it->second.job.pid <= 0 || !it->second.pidfd.valid())
    return FailedPrecondition("job " + std::to_string(id) + " has no process yet");
  if (!SignalProcess(it->second.pidfd, sig))
    return NotFound("process " + std::to_string(it->second.job.pid) + " is gone");
  return Status::Ok();
}

Status JobTable::SetExitCode(uint64_t id, int exit_code, ProcessEnd end) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return NotFound("no job " + std::to_string(id));
  it->second.job.exit_code = exit_code;
  it->second.job.failed = exit_code != 0;
  it->second.job.end = std::move(end);
  Persist(it->second.job);
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
  job.FreezeFigures();
  if (job.block) runtime::SharedControlBlock::Remove(job.block->name());
  Persist(job);
  Ended ended{job, std::move(it->second.pidfd)};
  ended_.push_back(id);
  DropOldEnded();
  return ended;
}

}  // namespace gandiva::controller
