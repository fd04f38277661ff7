// Notices when a job's process ends, whoever its parent is: one thread waits on
// the processes' pidfds with epoll and reports each exit through a callback.
//
// Thread-safety: Watch and Unwatch may be called from any thread (epoll is
// thread-safe; the monitor keeps no state of its own to lock). The callback
// runs on the monitor thread with no lock of the monitor's held.
#ifndef GANDIVA_NODE_JOBS_PROCESS_MONITOR_H_
#define GANDIVA_NODE_JOBS_PROCESS_MONITOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "gandiva/common/unique_fd.h"
#include "gandiva/status.h"

namespace gandiva::controller {

class ProcessMonitor {
 public:
  // `on_exit(job)` is called once the process of `job` has ended (perhaps more
  // than once: the receiver ignores jobs it has ended already).
  explicit ProcessMonitor(std::function<void(uint64_t job)> on_exit);
  ~ProcessMonitor();

  Status Start();
  void Stop();
  // Opens a pidfd for `pid` and watches it for `job`; the caller owns the fd and
  // calls Unwatch before closing it. NotFound if the process is gone already.
  StatusOr<UniqueFd> Watch(uint64_t job, int pid);
  // Watches a pidfd the caller opened (and owns) for `job`.
  void WatchFd(uint64_t job, int pidfd);
  void Unwatch(int pidfd);

 private:
  void Loop();
  std::function<void(uint64_t)> on_exit_;
  UniqueFd epoll_;
  UniqueFd stop_event_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_PROCESS_MONITOR_H_
