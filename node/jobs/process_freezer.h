// Keeps parked jobs quiet. A job parked at a boundary issues no work, but its
// process keeps threads and children that do: OpenBLAS workers spinning after
// their last call, OpenMP pools, DataLoader workers filling their prefetch
// queues, progress threads. On a CPU device they take cycles from the job that
// runs. So once a job is parked and is to stay parked, the device loop stops
// its whole process tree (the job's process and its descendants) with SIGSTOP,
// and continues it (SIGCONT) before anything asks the job to act again.
//
// A FreezerGuardian process holds the list of stopped pids and continues them
// if gandivad dies; the job's lease then fails it open as always.
//
// Thread-safety: every method takes mu_, a leaf lock (device loops call in
// while holding theirs). Each job is frozen and thawed by one device loop.
#ifndef GANDIVA_NODE_JOBS_PROCESS_FREEZER_H_
#define GANDIVA_NODE_JOBS_PROCESS_FREEZER_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"
#include "jobs/freezer_guardian.h"

namespace gandiva::controller {

// Pids in a /proc/PID/task/TID/children file ("12 34 "), in order; junk skipped.
std::vector<int32_t> ParseChildrenList(const std::string& text);

class ProcessFreezer {
 public:
  // enabled=false: a freezer that never freezes (gandivad --freeze-parked off).
  // If the guardian cannot start, freezing is off too (logged): never stop a
  // job without something to continue it.
  explicit ProcessFreezer(bool enabled);
  ~ProcessFreezer();  // continues whatever is still stopped
  ProcessFreezer(const ProcessFreezer&) = delete;
  ProcessFreezer& operator=(const ProcessFreezer&) = delete;

  bool enabled() const { return guardian_ != nullptr; }
  // Stops `pid` and its descendants (a job frozen already: no-op). The guardian
  // hears of each pid before it is stopped. A descendant that the user of
  // `pid` could not signal (a setuid program that took another user's real
  // uid) is left alone, with its own descendants: gandivad, as root, stops no
  // process the job's user could not. Each is signalled through a pidfd, so a
  // pid reused meanwhile is never stopped or continued.
  Status Freeze(uint64_t job, int32_t pid);
  // Continues everything Freeze stopped for the job (not frozen: no-op).
  void Thaw(uint64_t job);
  bool IsFrozen(uint64_t job) const;
  void ThawAll();
  // Jobs frozen so far (for the log and tests).
  uint64_t freezes() const;
  // The guardian's pid (-1: none), for tests.
  pid_t guardian_pid() const;

 private:
  void ThawLocked(uint64_t job);
  void GuardianLost();

  mutable std::mutex mu_;
  std::unique_ptr<FreezerGuardian> guardian_;
  struct Stopped {
    int32_t pid;
    UniqueFd pidfd;
  };
  std::map<uint64_t, std::vector<Stopped>> frozen_;  // job -> processes stopped
  size_t stopped_count_ = 0;
  uint64_t freezes_ = 0;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_PROCESS_FREEZER_H_
