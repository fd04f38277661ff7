#include "memory/driver_release.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "gandiva/common/clock.h"
#include "gandiva/common/log.h"
#include "interpose/driver.h"
#include "memory/memory_tracker.h"

namespace gandiva::shim {
namespace {

std::atomic<bool> g_released{false};

// The checkpoint entry points are not hooked (the shim never needs to see a job
// call them): looked up in the real driver. Null when it lacks them (driver < 570).
template <typename Pfn>
Pfn Lookup(const char* name) {
  if (!LoadDriver() || !DriverHandle()) return nullptr;
  return reinterpret_cast<Pfn>(RealDlsym(DriverHandle(), name));
}

struct Api {
  PFN_cuCheckpointProcessLock_v12080 lock = nullptr;
  PFN_cuCheckpointProcessCheckpoint_v12080 checkpoint = nullptr;
  PFN_cuCheckpointProcessRestore_v12080 restore = nullptr;
  PFN_cuCheckpointProcessUnlock_v12080 unlock = nullptr;
  bool ok() const { return lock && checkpoint && restore && unlock; }
};

const Api& CheckpointApi() {
  static const Api api = [] {
    Api a;
    a.lock = Lookup<PFN_cuCheckpointProcessLock_v12080>("cuCheckpointProcessLock");
    a.checkpoint =
        Lookup<PFN_cuCheckpointProcessCheckpoint_v12080>("cuCheckpointProcessCheckpoint");
    a.restore = Lookup<PFN_cuCheckpointProcessRestore_v12080>("cuCheckpointProcessRestore");
    a.unlock = Lookup<PFN_cuCheckpointProcessUnlock_v12080>("cuCheckpointProcessUnlock");
    return a;
  }();
  return api;
}

// A lock that cannot complete (a thread stuck in a call) must not hang the park.
unsigned LockTimeoutMs() {
  const char* v = std::getenv("GANDIVA_SHIM_DRIVER_LOCK_TIMEOUT_MS");
  return v && *v ? static_cast<unsigned>(std::strtoul(v, nullptr, 10)) : 10000u;
}

}  // namespace

ReleaseMechanism CurrentReleaseMechanism() {
  const char* v = std::getenv("GANDIVA_SHIM_RELEASE");
  return v && std::strcmp(v, "driver") == 0 ? ReleaseMechanism::kDriver : ReleaseMechanism::kSwap;
}

bool DriverReleased() { return g_released.load(std::memory_order_acquire); }

DriverReleaseResult DriverReleaseOut() {
  DriverReleaseResult r;
  const Api& api = CheckpointApi();
  if (!api.ok()) {
    r.status = CUDA_ERROR_NOT_FOUND;
    r.step = "cuCheckpointProcess* lookup (driver >= 570 needed)";
    return r;
  }
  const int pid = static_cast<int>(getpid());
  uint64_t t0 = MonotonicNowNs();
  CUcheckpointLockArgs lock_args{};
  lock_args.timeoutMs = LockTimeoutMs();
  r.status = api.lock(pid, &lock_args);
  r.lock_ns = MonotonicNowNs() - t0;
  if (r.status != CUDA_SUCCESS) {
    r.step = "cuCheckpointProcessLock";
    return r;
  }
  t0 = MonotonicNowNs();
  r.status = api.checkpoint(pid, nullptr);
  r.move_ns = MonotonicNowNs() - t0;
  if (r.status != CUDA_SUCCESS) {
    r.step = "cuCheckpointProcessCheckpoint";
    api.unlock(pid, nullptr);  // back to running, memory resident
    return r;
  }
  g_released.store(true, std::memory_order_release);
  MemoryTracker::Get().SetReleasedByDriver(true);
  return r;
}

DriverReleaseResult DriverReleaseIn() {
  DriverReleaseResult r;
  const Api& api = CheckpointApi();
  if (!DriverReleased() || !api.ok()) return r;
  const int pid = static_cast<int>(getpid());
  uint64_t t0 = MonotonicNowNs();
  r.status = api.restore(pid, nullptr);
  r.lock_ns = MonotonicNowNs() - t0;
  if (r.status != CUDA_SUCCESS) {
    r.step = "cuCheckpointProcessRestore";
    return r;
  }
  t0 = MonotonicNowNs();
  r.status = api.unlock(pid, nullptr);
  r.move_ns = MonotonicNowNs() - t0;
  if (r.status != CUDA_SUCCESS) {
    r.step = "cuCheckpointProcessUnlock";
    return r;
  }
  g_released.store(false, std::memory_order_release);
  MemoryTracker::Get().SetReleasedByDriver(false);
  return r;
}

}  // namespace gandiva::shim
