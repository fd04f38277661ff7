// Attach, park and fail-open logic of the job runtime; the fast path is inline in the header.
#include "runtime/job_runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "common/log.h"
#include "runtime/futex.h"
#include "runtime/shared_control_block.h"

namespace gandiva::runtime {

std::atomic<JobRuntime*> JobRuntime::instance_{nullptr};

JobRuntime::JobRuntime() = default;

JobRuntime& JobRuntime::CreateInstance() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked on purpose: other threads (and atexit handlers) may still gate on it.
    auto* rt = new JobRuntime();
    rt->AttachFromEnvironment();
    instance_.store(rt, std::memory_order_release);
    std::atexit([] { instance_.load()->Detach(); });
  });
  return *instance_.load(std::memory_order_acquire);
}

void JobRuntime::AttachFromEnvironment() {
  const char* name = std::getenv(kEnvControlBlock);
  if (name && *name) {
    auto opened = SharedControlBlock::Open(name);
    if (opened.ok()) {
      shared_ = std::move(opened).value();
      cb_ = shared_->get();
      cb_->pid.store(getpid(), std::memory_order_relaxed);
      managed_.store(true, std::memory_order_relaxed);
      GD_LOG(kDebug, "attached to control block %s as job %llu", name,
             static_cast<unsigned long long>(cb_->job_id));
      return;
    }
    GD_LOG(kWarn, "cannot attach to the controller (%s); running unmanaged",
           opened.status().ToString().c_str());
  } else {
    GD_LOG(kInfo, "no gandiva controller (%s not set); running unmanaged", kEnvControlBlock);
  }
  private_block_ = std::make_unique<ControlBlock>();
  InitControlBlock(private_block_.get(), 0, 0, "");
  cb_ = private_block_.get();
  cb_->pid.store(getpid(), std::memory_order_relaxed);
}

void JobRuntime::FirstBoundary() {
  if (cb_->boundary_source.load(std::memory_order_relaxed) == 0)
    cb_->boundary_source.store(1, std::memory_order_relaxed);
  cb_->phase.store(kPhaseRunning, std::memory_order_release);
  FutexWakeAll(&cb_->phase);
}

// The CUDA shim, when preloaded, exports its park hooks under this name so that
// every copy of the runtime in the process (libgandiva.so, the Python extension)
// swaps device memory at its explicit boundaries, not only the shim's own copy.
static ParkHooks FindProcessParkHooks() {
  using Getter = const ParkHooks* (*)();
  auto get = reinterpret_cast<Getter>(dlsym(RTLD_DEFAULT, "gandiva_shim_park_hooks"));
  const ParkHooks* hooks = get ? get() : nullptr;
  return hooks ? *hooks : ParkHooks{};
}

void JobRuntime::Park(uint64_t now) {
  if (!hooks_.on_parked && !hooks_.on_resuming) hooks_ = FindProcessParkHooks();
  cb_->parked_at_ns.store(now, std::memory_order_relaxed);
  cb_->park_count.fetch_add(1, std::memory_order_relaxed);
  cb_->phase.store(kPhaseParked, std::memory_order_release);
  FutexWakeAll(&cb_->phase);  // the controller may be waiting for the park
  if (hooks_.on_parked) hooks_.on_parked(cb_);
  SleepUntilResumed();
  if (hooks_.on_resuming) hooks_.on_resuming(cb_);
  const uint64_t resumed = MonotonicNowNs();
  cb_->resumed_at_ns.store(resumed, std::memory_order_relaxed);
  cb_->parked_total_ns.fetch_add(resumed - now, std::memory_order_relaxed);
  cb_->phase.store(kPhaseRunning, std::memory_order_release);
  FutexWakeAll(&cb_->phase);  // gated threads sleep on `request`, the controller on `phase`
}

bool JobRuntime::SleepUntilResumed() {
  for (;;) {
    // Gone first: a stopping controller also sets kRequestRun to wake us.
    if (cb_->controller_gone.load(std::memory_order_acquire)) {
      BecomeUnmanaged("the controller stopped");
      return false;
    }
    if (cb_->request.load(std::memory_order_acquire) == kRequestRun) return true;
    const uint64_t now = MonotonicNowNs();
    const uint64_t beat = cb_->heartbeat_ns.load(std::memory_order_acquire);
    const uint64_t expiry = beat + cb_->lease_ns;
    if (cb_->lease_ns > 0 && now >= expiry) {
      BecomeUnmanaged("the controller's lease expired");
      return false;
    }
    // Sleep until resumed, or until the lease would expire if no heartbeat came.
    FutexWait(&cb_->request, kRequestSuspend, cb_->lease_ns > 0 ? expiry - now : 0);
  }
}

void JobRuntime::WaitWhileParked() {
  while (cb_->phase.load(std::memory_order_acquire) == kPhaseParked && managed()) {
    if (cb_->request.load(std::memory_order_acquire) == kRequestRun) {
      // Resume requested; the boundary thread is about to flip the phase.
      FutexWait(&cb_->phase, kPhaseParked, 1'000'000);
      continue;
    }
    const uint64_t now = MonotonicNowNs();
    const uint64_t expiry = cb_->heartbeat_ns.load(std::memory_order_acquire) + cb_->lease_ns;
    if (cb_->controller_gone.load(std::memory_order_acquire) || (cb_->lease_ns && now >= expiry))
      return;  // the parked boundary thread notices the same and fails open
    FutexWait(&cb_->request, kRequestSuspend, cb_->lease_ns ? expiry - now : 0);
  }
}

void JobRuntime::BecomeUnmanaged(const char* why) {
  if (!managed_.exchange(false)) return;
  cb_->fail_open.store(1, std::memory_order_release);
  GD_LOG(kWarn, "job %llu: %s; resuming and running unmanaged",
         static_cast<unsigned long long>(cb_->job_id), why);
}

void JobRuntime::Detach() {
  cb_->phase.store(kPhaseExited, std::memory_order_release);
  FutexWakeAll(&cb_->phase);
}

}  // namespace gandiva::runtime
