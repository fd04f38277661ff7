// A SIGBUS handler for control blocks cut short; see shrink_guard.h.
#include "shrink_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace gandiva::runtime::shrink_guard {

namespace {

constexpr int kSlots = 4096;

struct Slot {
  std::atomic<uintptr_t> begin{0};  // 0: free
  std::atomic<size_t> length{0};
  std::atomic<bool> cut{false};
};

Slot g_slots[kSlots];
struct sigaction g_previous;
std::once_flag g_installed;
Status g_install_status = Status::Ok();

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const uintptr_t begin = s.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr >= begin + s.length.load(std::memory_order_relaxed))
      continue;
    // Zero pages over the whole block, in place: the faulting access runs
    // again on them. mmap is a plain system call here (no lock is taken).
    if (mmap(reinterpret_cast<void*>(begin), s.length.load(), PROT_READ | PROT_WRITE,
             MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
      s.cut.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not ours (or no memory to put there): as if we had never been installed.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) return g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    return g_previous.sa_handler(sig);
  }
  // Default action: put it back and return; the access faults again and the
  // kernel ends the process with SIGBUS, as without us.
  signal(SIGBUS, SIG_DFL);
}

}  // namespace

Status Install() {
  std::call_once(g_installed, [] {
    struct sigaction sa {};
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, &g_previous) != 0)
      g_install_status = Internal(std::string("cannot handle SIGBUS: ") + std::strerror(errno));
  });
  return g_install_status;
}

int Register(void* begin, size_t length) {
  static std::mutex registering;  // one writer at a time; the handler only reads
  std::lock_guard lock(registering);
  for (Slot& s : g_slots) {
    if (s.begin.load(std::memory_order_relaxed) != 0) continue;
    s.length.store(length, std::memory_order_relaxed);
    s.cut.store(false, std::memory_order_relaxed);
    s.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
    return static_cast<int>(&s - g_slots);
  }
  return -1;
}

void Unregister(int slot) {
  if (slot >= 0 && slot < kSlots) g_slots[slot].begin.store(0, std::memory_order_release);
}

bool WasCut(int slot) {
  return slot >= 0 && slot < kSlots && g_slots[slot].cut.load(std::memory_order_acquire);
}

}  // namespace gandiva::runtime::shrink_guard
