// The job side of gandiva inside a training process: attaches to the control block
// the controller created, marks iteration boundaries, parks when asked, and gates
// other threads (the CUDA shim's launches) while parked.
//
// Threading: Boundary() is called by one thread at a time (the training loop, or
// the shim's boundary detector). GateWait() may be called from any thread.
// Fail-open: a parked job resumes itself when the controller's heartbeat lease
// expires or the controller says it is gone, and then runs unmanaged.
#ifndef GANDIVA_RUNTIME_JOB_RUNTIME_H_
#define GANDIVA_RUNTIME_JOB_RUNTIME_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "gandiva/common/clock.h"
#include "gandiva/contract/control_block.h"
#include "gandiva/contract/environment.h"
#include "gandiva/contract/profiler.h"

namespace gandiva::runtime {

class SharedControlBlock;

// Called on the boundary thread around a park: after the job reports parked and
// before it sleeps, and after it is resumed and before it reports running. The
// CUDA shim uses them to swap device memory out and in. Must not call Boundary().
struct ParkHooks {
  void (*on_parked)(ControlBlock* cb) = nullptr;
  void (*on_resuming)(ControlBlock* cb) = nullptr;
};

class JobRuntime {
 public:
  // The process-wide runtime, attached on first use (never fails: without a
  // controller it runs unmanaged with a private control block and says so once).
  static JobRuntime& Get() {
    JobRuntime* rt = instance_.load(std::memory_order_acquire);
    return rt ? *rt : CreateInstance();
  }

  // Marks an iteration boundary. Fast path: a clock read, a few stores into the
  // profile ring, one atomic load of the request word.
  void Boundary() {
    const uint64_t now = MonotonicNowNs();
    if (last_exit_ns_ != 0) {
      RecordIteration(&cb_->profile, now - last_exit_ns_, now);
    } else {
      FirstBoundary();
    }
    // SIGTERM with GANDIVA_CHECKPOINT_ON_TERM: save here and end (never returns).
    if (term_requested_.load(std::memory_order_relaxed)) [[unlikely]]
      CheckpointAndEndOnTerm();
    if (cb_->request.load(std::memory_order_acquire) != kRequestRun &&
        (managed_.load(std::memory_order_relaxed) || Rejoin()) && ParkDueHere()) {
      Park(now);
      last_exit_ns_ = MonotonicNowNs();
      return;
    }
    last_exit_ns_ = now;
  }

  // Launch gate: returns at once unless the job is parked, else waits for resume.
  void GateWait() {
    if (cb_->phase.load(std::memory_order_acquire) == kPhaseParked) WaitWhileParked();
  }

  // Whether a suspend takes effect at this boundary (see park_at_boundary).
  // Read only once a suspend is requested: the fast path never gets here.
  bool ParkDueHere() const {
    const uint64_t at = cb_->park_at_boundary.load(std::memory_order_acquire);
    return at == 0 || cb_->profile.iterations.load(std::memory_order_relaxed) >= at;
  }

  bool managed() const { return managed_.load(std::memory_order_relaxed); }
  uint64_t job_id() const { return cb_->job_id; }
  ControlBlock* control_block() const { return cb_; }
  IterationStats Stats() const { return ReadIterationStats(cb_->profile); }
  // Installs hooks run around every park (set once, before the first boundary).
  void SetParkHooks(ParkHooks hooks) { hooks_ = hooks; }
  // Marks the job exited (the controller sees it at once). Called at exit.
  void Detach();

 private:
  JobRuntime();
  static JobRuntime& CreateInstance();
  void AttachFromEnvironment();
  // The control block this process takes: GANDIVA_CONTROL_BLOCK, or its rank's
  // block in a gang; empty (and why in *why_not) when it cannot tell.
  static std::string BlockNameFromEnvironment(std::string* why_not);
  // The checkpoint this process restores from GANDIVA_RESTORE=DIR: its rank's part in a gang.
  std::string RestoreTarget(const char* dir) const;
  void FirstBoundary();
  void Park(uint64_t now);
  void PublishRegisteredStates();
  // Sleeps until resume is requested; false if it gave up on a dead controller.
  bool SleepUntilResumed();
  void WaitWhileParked();
  void SpinWhileRequestIs(uint32_t request, uint64_t spin_ns);
  // Time until the controller's heartbeat lease runs out: 0 once it has,
  // UINT64_MAX when the block has no lease.
  uint64_t LeaseLeftNs() const;
  // Checkpoint or restore while parked, as the controller asked.
  void Transfer(Request kind);
  void BecomeUnmanaged(const char* why);
  // A job that failed open on an expired lease is managed again once a
  // controller heartbeats its block again (a gandivad restarted on the same
  // state re-adopted it). Asked only while a park is requested and the job is
  // unmanaged; true once managed again.
  bool Rejoin();
  // GANDIVA_CHECKPOINT_ON_TERM (term_checkpoint.cc): the SIGTERM handler only
  // raises term_requested_ (and wakes a parked boundary thread); the boundary
  // thread then saves the registered state and ends the process by SIGTERM.
  void InstallTermCheckpoint();
  [[noreturn]] void CheckpointAndEndOnTerm();
  static void OnTerm(int sig);

  static std::atomic<JobRuntime*> instance_;
  // Per copy of the runtime (libgandiva.so, the Python extension, the shim each
  // carry one): each copy's handler chains to the one installed before it.
  static std::atomic<bool> term_requested_;
  std::string term_dir_;  // empty: SIGTERM is left as it was
  ControlBlock* cb_ = nullptr;
  std::unique_ptr<SharedControlBlock> shared_;
  std::unique_ptr<ControlBlock> private_block_;
  std::atomic<bool> managed_{false};
  uint64_t last_exit_ns_ = 0;
  int owner_pid_ = 0;  // the process that attached to the shared block
  ParkHooks hooks_;
  bool hooks_looked_up_ = false;
};

}  // namespace gandiva::runtime

#endif  // GANDIVA_RUNTIME_JOB_RUNTIME_H_
