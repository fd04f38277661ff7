// The freezer's guardian: a tiny process gandivad forks at start that knows
// which job processes gandivad has stopped (SIGSTOP) and continues them all
// (SIGCONT) the moment gandivad goes away, however it goes (a crash, SIGKILL):
// a job is never left suspended by a controller that went away. Once
// continued, a parked job's own lease fails it open as it would anyway.
//
// gandivad tells it over a SOCK_SEQPACKET socket pair, one message per change:
// int32 pids, +pid "about to be stopped", -pid "continued". gandivad sends +pid
// before it stops a process and -pid after it continued it, so the guardian's
// list is never short of a stopped process. End of stream (gandivad's end
// closed, by exit or crash) makes it continue every pid it holds and exit.
//
// The guardian runs between fork() and _exit() with only async-signal-safe
// calls (recv, kill, close_range, sigaction, prctl): gandivad is multithreaded.
#ifndef GANDIVA_NODE_JOBS_FREEZER_GUARDIAN_H_
#define GANDIVA_NODE_JOBS_FREEZER_GUARDIAN_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"

namespace gandiva::controller {

// A set of pids in storage fixed before fork: no allocation after it.
class FixedPidSet {
 public:
  explicit FixedPidSet(size_t capacity) : pids_(capacity, 0) {}
  // False when full (the pid is not added).
  bool Add(int32_t pid);
  void Remove(int32_t pid);
  bool Contains(int32_t pid) const;
  size_t size() const { return size_; }
  size_t capacity() const { return pids_.size(); }
  const int32_t* begin() const { return pids_.data(); }
  const int32_t* end() const { return pids_.data() + size_; }

 private:
  std::vector<int32_t> pids_;
  size_t size_ = 0;
};

// Applies one message's records to the set: +pid added, -pid removed, 0 ignored.
void ApplyGuardianRecords(const int32_t* records, size_t count, FixedPidSet& set);

class FreezerGuardian {
 public:
  // Most processes it keeps at once; the freezer stops no more than this.
  static constexpr size_t kCapacity = 4096;

  // Forks the guardian. Its end of the socket is close-on-exec in gandivad, so
  // jobs gandivad spawns never hold it open.
  static StatusOr<std::unique_ptr<FreezerGuardian>> Start();
  FreezerGuardian(const FreezerGuardian&) = delete;
  FreezerGuardian& operator=(const FreezerGuardian&) = delete;
  // Closes the socket (the guardian continues what it still holds) and reaps it.
  ~FreezerGuardian();

  // Tells the guardian; false if it is gone (then nothing may be stopped).
  bool WillStop(const std::vector<int32_t>& pids) { return Send(pids, +1); }
  bool Continued(const std::vector<int32_t>& pids) { return Send(pids, -1); }
  pid_t pid() const { return pid_; }

 private:
  FreezerGuardian(UniqueFd fd, pid_t pid) : fd_(std::move(fd)), pid_(pid) {}
  bool Send(const std::vector<int32_t>& pids, int sign);

  UniqueFd fd_;
  pid_t pid_ = -1;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_FREEZER_GUARDIAN_H_
