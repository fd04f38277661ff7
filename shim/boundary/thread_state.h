// Per-thread state of the shim: call counters and the boundary detector of the
// thread issuing the work. Reached through one initial-exec TLS pointer, so the
// launch path touches only its own cache lines: no atomics RMW, no lock, no allocation.
// Threads past kMaxThreads share an overflow slot (counted atomically, no detection).
#ifndef GANDIVA_SHIM_THREAD_STATE_H_
#define GANDIVA_SHIM_THREAD_STATE_H_

#include <atomic>
#include <cstdint>

#include "boundary/period_detector.h"
#include "interpose/driver.h"

namespace gandiva::shim {

inline constexpr int kMaxThreads = 128;

struct alignas(64) ThreadSlot {
  // Calls per hook; written by the owning thread only (plain load+store).
  std::atomic<uint64_t> calls[kNumHooks] = {};
  PeriodDetector detector;
  bool shared = false;  // the overflow slot: counters are RMW, no detector
  bool in_use = false;
  // Set while this thread serves a park (park hooks, a checkpoint or restore): its
  // calls then are the runtime's, not the training loop's, and stay out of its detector.
  bool serving_park = false;
};

ThreadSlot* ClaimThreadSlot();
// All slots handed out so far (for totals); count via *n.
ThreadSlot* ThreadSlots(int* n);
ThreadSlot* OverflowSlot();

inline ThreadSlot* CurrentThreadSlot() {
  static thread_local ThreadSlot* slot __attribute__((tls_model("initial-exec"))) = nullptr;
  ThreadSlot* s = slot;
  if (__builtin_expect(s == nullptr, 0)) s = slot = ClaimThreadSlot();
  return s;
}

inline void CountCall(ThreadSlot* s, HookId id) {
  auto& c = s->calls[static_cast<int>(id)];
  if (__builtin_expect(s->shared, 0)) {
    c.fetch_add(1, std::memory_order_relaxed);
  } else {
    c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

// Sum of a hook's calls over all threads (racy snapshot; for reports).
uint64_t TotalCalls(HookId id);

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_THREAD_STATE_H_
