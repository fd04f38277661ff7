// The node's job table: every job record, the registration ids, ending a job,
// and the process fds (pidfds) through which the process monitor sees exits.
//
// Thread-safety: one lock, mu_, guards every record; each method takes it and
// hands out copies, never pointers into the table. Nothing here calls another
// component while holding mu_, so the table is a leaf in the node's lock order.
// An ended job stays listed with how it ended, up to the newest kMaxEndedJobs
// of them: older ended records are dropped, so a node that runs jobs for
// months keeps a bounded table.
//
// With a store (SetStore), every change of a record is written through to it
// under the table's lock (the store's lock is a leaf below it), and dropped
// records are erased from it: the store always holds what the table holds.
#ifndef GANDIVA_NODE_JOBS_JOB_TABLE_H_
#define GANDIVA_NODE_JOBS_JOB_TABLE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"
#include "jobs/job.h"
#include "jobs/job_store.h"

namespace gandiva::controller {

class JobTable {
 public:
  static constexpr size_t kMaxEndedJobs = 1000;
  explicit JobTable(size_t max_ended = kMaxEndedJobs) : max_ended_(max_ended) {}

  // Writes every change through to `store` from now on (before any job is added).
  void SetStore(JobStore* store) { store_ = store; }

  // The id the next registered job gets; ids start at 1 and are never reused.
  uint64_t ReserveId();
  void Insert(Job job);
  // A job a restarted gandivad read back (live and re-adopted, or ended):
  // listed under its own id, with its process fd if live; ids go on after it.
  void Restore(Job job, UniqueFd pidfd);

  // The job, or NotFound ("no job N").
  StatusOr<Job> Find(uint64_t id) const;
  // The job if it has not ended; NotFound, or FailedPrecondition ("job N has exited").
  StatusOr<Job> Live(int64_t id) const;
  std::vector<Job> All() const;
  std::vector<Job> LiveJobs() const;
  // Calls `fn` for each live job under the lock (for cheap stores such as the
  // heartbeat, without copying records); `fn` must not call out.
  void ForEachLive(const std::function<void(const Job&)>& fn) const;

  // Changes a live job's record under the lock; `update` must not call out.
  Status UpdateLive(uint64_t id, const std::function<Status(Job&)>& update);
  // Changes a job's record, ended or not (what an ended job's migration still
  // records); `update` must not call out. NotFound if the job is unknown.
  Status Update(uint64_t id, const std::function<void(Job&)>& update);
  // The job's process is `pid`, watched through `pidfd`, which the table owns from now on.
  Status SetProcess(uint64_t id, int pid, UniqueFd pidfd, bool spawned);
  // Sends `sig` to the job's process through its pidfd, never by pid (a pid
  // freed and reused meanwhile is another process). FailedPrecondition if the
  // job has no process yet or has ended, NotFound if its process is gone.
  Status Signal(uint64_t id, int sig) const;
  // `gandiva run` reports how the process exited (also after the monitor ended the job).
  Status SetExitCode(uint64_t id, int exit_code, ProcessEnd end = {});

  struct Ended {
    Job job;
    UniqueFd pidfd;  // the caller stops watching it, then lets it close
  };
  // Ends a live job: terminal state, its device figures frozen, its control
  // block's name removed. nullopt if the job is unknown or had ended already.
  std::optional<Ended> End(uint64_t id, bool failed, int exit_code, const DeviceUsage& usage,
                           ProcessEnd end = {});

 private:
  struct Entry {
    Job job;
    UniqueFd pidfd;
  };
  void Persist(const Job& job) {  // mu_ held
    if (store_) store_->Put(job);
  }
  void DropOldEnded();  // mu_ held
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> jobs_;
  std::deque<uint64_t> ended_;  // ids of ended records, oldest first
  size_t max_ended_;
  uint64_t next_id_ = 1;
  JobStore* store_ = nullptr;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_JOB_TABLE_H_
