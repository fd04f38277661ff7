// The job side's helper threads (the checkpoint code's prefaulting receive
// memory, checking chunks ahead of the load, unmapping after a restore; the
// bulk channel's sealing ahead) only make it faster. They run inside the
// job's process, which may be out of threads (a cgroup's
// pids.max, RLIMIT_NPROC): std::thread then throws, and an exception must not
// leave the library (it would end the job mid-restore). StartHelperThread
// says false instead, and every caller has a way without the thread.
#ifndef GANDIVA_COMMON_HELPER_THREAD_H_
#define GANDIVA_COMMON_HELPER_THREAD_H_

#include <exception>
#include <thread>
#include <utility>

namespace gandiva {

// Starts fn on a new thread in *thread; false, with *thread untouched and fn
// destroyed, when no thread could be had.
template <typename Fn>
bool StartHelperThread(std::thread* thread, Fn&& fn) noexcept {
  try {
    *thread = std::thread(std::forward<Fn>(fn));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace gandiva

#endif  // GANDIVA_COMMON_HELPER_THREAD_H_
