// Cross-process futex wait/wake on a 32-bit word in shared memory (the shared,
// not the PRIVATE, futex ops: the two sides are different processes).
#ifndef GANDIVA_RUNTIME_FUTEX_H_
#define GANDIVA_RUNTIME_FUTEX_H_

#include <atomic>
#include <cstdint>

namespace gandiva::runtime {

// Sleeps while *word == expected, at most timeout_ns (0 = no limit). Returns on
// wake, value change, timeout or signal; the caller re-checks its condition.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns);
// Wakes every sleeper on the word.
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace gandiva::runtime

#endif  // GANDIVA_RUNTIME_FUTEX_H_
