// The fixed pool of per-thread slots (static storage: nothing is allocated).
#include "boundary/thread_state.h"

namespace gandiva::shim {
namespace {

ThreadSlot g_slots[kMaxThreads];
ThreadSlot g_overflow;
std::atomic<int> g_claimed{0};

}  // namespace

ThreadSlot* ClaimThreadSlot() {
  const int i = g_claimed.fetch_add(1, std::memory_order_relaxed);
  if (i < kMaxThreads) {
    g_slots[i].in_use = true;
    return &g_slots[i];
  }
  g_overflow.shared = true;
  g_overflow.in_use = true;
  return &g_overflow;
}

ThreadSlot* ThreadSlots(int* n) {
  const int c = g_claimed.load(std::memory_order_relaxed);
  *n = c < kMaxThreads ? c : kMaxThreads;
  return g_slots;
}

ThreadSlot* OverflowSlot() { return &g_overflow; }

uint64_t TotalCalls(HookId id) {
  int n = 0;
  ThreadSlot* slots = ThreadSlots(&n);
  uint64_t total = g_overflow.calls[static_cast<int>(id)].load(std::memory_order_relaxed);
  for (int i = 0; i < n; ++i)
    total += slots[i].calls[static_cast<int>(id)].load(std::memory_order_relaxed);
  return total;
}

}  // namespace gandiva::shim
