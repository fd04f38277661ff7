// The checkpoint code's helper threads (prefaulting receive memory, checking
// chunks ahead of the load, unmapping after a restore) only make it faster.
// They run inside the job's process, which may be out of threads (a cgroup's
// pids.max, RLIMIT_NPROC): std::thread then throws, and an exception must not
// leave the library (it would end the job mid-restore). StartHelperThread
// says false instead, and every caller has a way without the thread.
#ifndef GANDIVA_CHECKPOINT_HELPER_THREAD_H_
#define GANDIVA_CHECKPOINT_HELPER_THREAD_H_

#include <exception>
#include <thread>
#include <utility>

namespace gandiva::checkpoint {

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

}  // namespace gandiva::checkpoint

#endif  // GANDIVA_CHECKPOINT_HELPER_THREAD_H_
