// Attach, park and fail-open logic of the job runtime; the fast path is inline in the header.
#include "gandiva/runtime/job_runtime.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gandiva/checkpoint/registry.h"
#include "gandiva/checkpoint/state_transfer.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "gandiva/contract/shared_control_block.h"

namespace gandiva::runtime {

std::atomic<JobRuntime*> JobRuntime::instance_{nullptr};

JobRuntime::JobRuntime() = default;

JobRuntime& JobRuntime::CreateInstance() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Leaked on purpose: other threads (and atexit handlers) may still gate on it.
    auto* rt = new JobRuntime();
    rt->AttachFromEnvironment();
    rt->InstallTermCheckpoint();
    instance_.store(rt, std::memory_order_release);
    std::atexit([] { instance_.load()->Detach(); });
  });
  return *instance_.load(std::memory_order_acquire);
}

std::string JobRuntime::BlockNameFromEnvironment(std::string* why_not) {
  const char* base = std::getenv(kEnvControlBlock);
  if (!base || !*base) {
    *why_not = std::string(kEnvControlBlock) + " not set";
    return "";
  }
  const char* ranks = std::getenv(kEnvRanks);
  if (!ranks || std::atoi(ranks) <= 1) return base;
  // A gang: each rank has its own block, chosen by the launcher's rank variables.
  const char* rank = std::getenv(kEnvLocalRank);
  if (!rank || !*rank) rank = std::getenv(kEnvRank);
  char* end = nullptr;
  const long k = rank ? std::strtol(rank, &end, 10) : -1;
  if (!rank || *end != '\0' || k < 0) {
    *why_not = std::string("a gang of ") + ranks + " ranks, but this process has no rank (" +
               kEnvLocalRank + "/" + kEnvRank + " " + (rank ? rank : "unset") + ")";
    return "";
  }
  if (k >= std::atoi(ranks)) {
    // Running it unmanaged would hang the gang: its other ranks park, this one
    // waits for them in its first collective. Say so and stop instead.
    GD_LOG(kError,
           "this process is rank %ld, but the gang has %s ranks (gandiva run --ranks %s): "
           "start as many processes as --ranks says",
           k, ranks, ranks);
    std::_Exit(75);
  }
  return std::string(base) + kRankBlockSuffix + std::to_string(k);
}

void JobRuntime::AttachFromEnvironment() {
  std::string why_not;
  const std::string block_name = BlockNameFromEnvironment(&why_not);
  const char* name = block_name.empty() ? nullptr : block_name.c_str();
  if (name) {
    auto opened = SharedControlBlock::Open(name);
    // The block belongs to the first process that attaches; a child of the job
    // (a data-loader worker, a subprocess inheriting the environment) runs unmanaged.
    int32_t owner = 0;
    if (opened.ok() && !(*opened)->get()->pid.compare_exchange_strong(owner, getpid()) &&
        owner != getpid() && kill(owner, 0) == 0) {
      GD_LOG(kInfo, "control block %s belongs to pid %d; this process runs unmanaged", name, owner);
    } else if (opened.ok()) {
      shared_ = std::move(opened).value();
      cb_ = shared_->get();
      cb_->pid.store(getpid(), std::memory_order_relaxed);
      owner_pid_ = getpid();
      managed_.store(true, std::memory_order_relaxed);
      GD_LOG(kDebug, "attached to control block %s as job %llu", name,
             static_cast<unsigned long long>(cb_->job_id));
      return;
    }
    if (!opened.ok())
      GD_LOG(kWarn, "cannot attach to the controller (%s); running unmanaged",
             opened.status().ToString().c_str());
  } else {
    GD_LOG(kInfo, "no gandiva controller (%s); running unmanaged", why_not.c_str());
  }
  private_block_ = std::make_unique<ControlBlock>();
  InitControlBlock(private_block_.get(), 0, 0, "");
  cb_ = private_block_.get();
  cb_->pid.store(getpid(), std::memory_order_relaxed);
}

void JobRuntime::FirstBoundary() {
  // `gandiva run --restore DIR`: continue from a checkpoint, managed or not.
  if (const char* dir = std::getenv(checkpoint::kEnvRestore);
      dir && *dir && checkpoint::StateRegistry::Global().ClaimEnvironmentRestore()) {
    const std::string target = RestoreTarget(dir);
    uint64_t bytes = 0;
    // A failure ends the process below, so a chunk may be checked as it is
    // loaded rather than all before: one pass over the file instead of two.
    Status s = checkpoint::RestoreState(target, &bytes, checkpoint::RestoreCheck::kWhileLoading);
    if (!s.ok()) {
      // Continuing from scratch would silently lose the run: stop instead.
      GD_LOG(kError, "cannot restore from %s: %s", target.c_str(), s.ToString().c_str());
      std::_Exit(75);
    }
    GD_LOG(kInfo, "restored %llu bytes of state from %s", static_cast<unsigned long long>(bytes),
           target.c_str());
  } else if (const char* arriving = std::getenv(checkpoint::kEnvArriving);
             arriving && *arriving == '1') {
    // A migration's copy: make the memory the state will arrive in ready now,
    // while the source still trains, rather than during the downtime.
    uint64_t bytes = 0;
    if (Status s = checkpoint::ReserveForRestore(&bytes); !s.ok())
      GD_LOG(kWarn, "could not reserve memory for the arriving state: %s", s.ToString().c_str());
    else if (bytes)
      GD_LOG(kInfo, "reserved %llu bytes for the arriving state",
             static_cast<unsigned long long>(bytes));
  }
  if (cb_->boundary_source.load(std::memory_order_relaxed) == 0)
    cb_->boundary_source.store(1, std::memory_order_relaxed);
  PublishRegisteredStates();
  cb_->phase.store(kPhaseRunning, std::memory_order_release);
  FutexWakeAll(&cb_->phase);
}

std::string JobRuntime::RestoreTarget(const char* dir) const {
  std::string path = std::string("file:") + dir + "/";
  if (cb_->gang_size > 1)  // a gang's checkpoint: one part per rank, all at one iteration
    path += checkpoint::kRankDirPrefix + std::to_string(cb_->gang_rank) + "/";
  return path + checkpoint::kCheckpointFileName;
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

// For the controller, which cannot see the registry: whether a checkpoint
// would hold anything (a migration of a job that registered nothing is refused).
void JobRuntime::PublishRegisteredStates() {
  const size_t n = checkpoint::StateRegistry::Global().Count();
  cb_->registered_states.store(static_cast<uint32_t>(n), std::memory_order_relaxed);
}

void JobRuntime::Park(uint64_t now) {
  if (!hooks_looked_up_) {  // once: the shim, if any, is loaded before the first boundary
    if (!hooks_.on_parked && !hooks_.on_resuming) hooks_ = FindProcessParkHooks();
    hooks_looked_up_ = true;
  }
  PublishRegisteredStates();  // an uncontended lock: tens of ns
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
  // The memory of a restore while parked (Transfer), if any; else one atomic load.
  checkpoint::FreeRestoredMemory();
}

bool JobRuntime::SleepUntilResumed() {
  for (;;) {
    // A parked job saves at once (it is at a boundary); the handler woke us.
    if (term_requested_.load(std::memory_order_acquire)) CheckpointAndEndOnTerm();
    // Gone first: a stopping controller also sets kRequestRun to wake us.
    if (cb_->controller_gone.load(std::memory_order_acquire)) {
      BecomeUnmanaged("the controller stopped");
      return false;
    }
    const uint32_t request = cb_->request.load(std::memory_order_acquire);
    if (request == kRequestRun) return true;
    if (request == kRequestCheckpoint || request == kRequestRestore) {
      Transfer(static_cast<Request>(request));
      continue;
    }
    // A gang moved its park target past this rank's count: run up to it (the
    // controller wakes us after raising it, and again until we have left).
    if (!ParkDueHere()) return true;
    const uint64_t lease_left = LeaseLeftNs();
    if (lease_left == 0) {
      BecomeUnmanaged("the controller's lease expired");
      return false;
    }
    // Next in line: spin briefly so the coming resume is seen at once.
    if (const uint64_t spin = cb_->prewake_spin_ns.exchange(0, std::memory_order_acq_rel)) {
      SpinWhileRequestIs(request, spin);
      continue;
    }
    // Sleep until the request changes, or until the lease would expire if no heartbeat came.
    FutexWait(&cb_->request, request, lease_left == UINT64_MAX ? 0 : lease_left);
  }
}

uint64_t JobRuntime::LeaseLeftNs() const {
  if (cb_->lease_ns == 0) return UINT64_MAX;
  const uint64_t expiry = cb_->heartbeat_ns.load(std::memory_order_acquire) + cb_->lease_ns;
  const uint64_t now = MonotonicNowNs();
  return now >= expiry ? 0 : expiry - now;
}

void JobRuntime::SpinWhileRequestIs(uint32_t request, uint64_t spin_ns) {
  const uint64_t until = MonotonicNowNs() + spin_ns;
  for (uint32_t i = 0;; ++i) {
    if (cb_->request.load(std::memory_order_acquire) != request) return;
    __builtin_ia32_pause();
    if ((i & 63) == 0 && MonotonicNowNs() >= until) return;
  }
}

void JobRuntime::Transfer(Request kind) {
  cb_->transfer_state.store(kTransferBusy, std::memory_order_release);
  const std::string target(cb_->transfer_target,
                           strnlen(cb_->transfer_target, kTransferTargetSize));
  const uint64_t start = MonotonicNowNs();
  uint64_t bytes = 0;
  // A sealed restore is a migration's warm copy, discarded if it fails (and
  // never released to train): its chunks may be checked as they load, off
  // the receiving thread that paces the stream. A gang's restore from files
  // is not discarded: checked before loading.
  const auto check = target.starts_with("sealed:") ? checkpoint::RestoreCheck::kWhileLoading
                                                   : checkpoint::RestoreCheck::kBeforeLoading;
  // Restored while parked: its stream's memory is given back once the job is
  // released (Park), not during the release (a migration's switch).
  Status s = kind == kRequestCheckpoint
                 ? checkpoint::SaveState(target, cb_->job_id, &bytes)
                 : checkpoint::RestoreState(target, &bytes, check,
                                            checkpoint::RestoredMemory::kFreeAtRelease);
  cb_->transfer_bytes.store(bytes, std::memory_order_relaxed);
  cb_->transfer_ns.store(MonotonicNowNs() - start, std::memory_order_relaxed);
  std::snprintf(cb_->transfer_error, kTransferErrorSize, "%s", s.ok() ? "" : s.ToString().c_str());
  if (!s.ok())
    GD_LOG(kWarn, "job %llu: %s %s failed: %s", static_cast<unsigned long long>(cb_->job_id),
           kind == kRequestCheckpoint ? "checkpoint to" : "restore from", target.c_str(),
           s.ToString().c_str());
  // Stay parked; a controller that already moved on to another request wins.
  uint32_t expected = kind;
  cb_->request.compare_exchange_strong(expected, kRequestSuspend, std::memory_order_acq_rel);
  cb_->transfers.fetch_add(1, std::memory_order_relaxed);
  cb_->transfer_state.store(s.ok() ? kTransferDone : kTransferFailed, std::memory_order_release);
  FutexWakeAll(&cb_->transfer_state);
}

void JobRuntime::WaitWhileParked() {
  while (cb_->phase.load(std::memory_order_acquire) == kPhaseParked && managed()) {
    const uint32_t request = cb_->request.load(std::memory_order_acquire);
    if (request == kRequestRun) {
      // Resume requested; the boundary thread is about to flip the phase.
      FutexWait(&cb_->phase, kPhaseParked, 1'000'000);
      continue;
    }
    const uint64_t lease_left = LeaseLeftNs();
    if (cb_->controller_gone.load(std::memory_order_acquire) || lease_left == 0)
      return;  // the parked boundary thread notices the same and fails open
    FutexWait(&cb_->request, request, lease_left == UINT64_MAX ? 0 : lease_left);
  }
}

void JobRuntime::BecomeUnmanaged(const char* why) {
  if (cb_->exit_if_orphaned.load(std::memory_order_acquire)) {
    // A migration's warm copy whose state never arrived: the job runs on at its
    // source, so this copy must not start training on its own.
    GD_LOG(kWarn, "job %llu: %s before this copy received the job's state; exiting",
           static_cast<unsigned long long>(cb_->job_id), why);
    std::_Exit(75);
  }
  if (!managed_.exchange(false)) return;
  cb_->fail_open.store(1, std::memory_order_release);
  GD_LOG(kWarn, "job %llu: %s; resuming and running unmanaged",
         static_cast<unsigned long long>(cb_->job_id), why);
}

bool JobRuntime::Rejoin() {
  if (!shared_ || !cb_->fail_open.load(std::memory_order_acquire) ||
      cb_->controller_gone.load(std::memory_order_acquire) || LeaseLeftNs() == 0)
    return false;
  cb_->fail_open.store(0, std::memory_order_release);
  managed_.store(true, std::memory_order_release);
  GD_LOG(kInfo, "job %llu: the controller is back; managed again",
         static_cast<unsigned long long>(cb_->job_id));
  return true;
}

void JobRuntime::Detach() {
  // A forked child exiting (atexit is inherited) must not mark the job exited.
  if (owner_pid_ != 0 && owner_pid_ != getpid()) return;
  cb_->phase.store(kPhaseExited, std::memory_order_release);
  FutexWakeAll(&cb_->phase);
}

}  // namespace gandiva::runtime
