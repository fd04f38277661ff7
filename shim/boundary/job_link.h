// The shim's link to the job runtime (libgandiva): attaching on first CUDA use, the
// launch gate, inferred iteration boundaries and the capture rule.
// Fast path of the gate: one load of an immutable pointer and one atomic load of the
// control block's phase word. Everything else here is off the launch path.
#ifndef GANDIVA_SHIM_JOB_LINK_H_
#define GANDIVA_SHIM_JOB_LINK_H_

#include <atomic>
#include <cstdint>

#include "boundary/thread_state.h"
#include "gandiva/contract/control_block.h"
#include "gandiva/runtime/job_runtime.h"
#include "interpose/driver.h"

namespace gandiva::shim {

// Points at a dummy word until the job is attached, then at the control block's phase.
extern constinit std::atomic<std::atomic<uint32_t>*> g_gate_phase;

// Called once the real driver is loaded: attaches the job runtime (from
// GANDIVA_CONTROL_BLOCK, or unmanaged), installs the park hooks, arms the gate.
// Deferred to the first CUDA call so that processes which merely inherit
// LD_PRELOAD (shells, tools) never touch the job's control block.
void AttachJob();
// The control block, or nullptr before AttachJob.
runtime::ControlBlock* JobControlBlock();

// Parks the calling thread while the job is parked, unless it is the thread serving
// the park (see ParkHooks below).
void GateSlow();
// Parks the calling thread while the job is parked (suspended or swapping).
inline void Gate() {
  if (__builtin_expect(
          g_gate_phase.load(std::memory_order_relaxed)->load(std::memory_order_acquire) ==
              runtime::kPhaseParked,
          0))
    GateSlow();
}

// The park hooks every copy of the job runtime in the process runs (the shim's own,
// and through gandiva_shim_park_hooks libgandiva.so's and the Python extension's).
// Between on_parked and on_resuming the boundary thread serves the park: swap, and
// checkpoints and restores the controller asks for, whose registered save and load
// functions copy device memory (torch.save: cuMemcpyDtoHAsync). That thread is never
// gated (it would wait for itself) and its calls stay out of the boundary detector;
// every other thread stays gated.
runtime::ParkHooks ParkHooks();

// Before a stream capture starts: a capture contains no host sync, hence no boundary,
// so none may start while a suspend is pending (see job_link.cc for the rule).
void CaptureGate();

// After a successful host-blocking sync on this thread: feeds the detector and, when
// the sync opens a period on the thread that drives boundaries, marks the boundary
// (which parks here if the controller asked). Never called on the launch path.
// Returns what it decided (the trace records it): kSyncBoundary when the thread's
// detector took the sync for a boundary, kSyncDrove when that boundary drove the job's.
inline constexpr int kSyncBoundary = 1;
inline constexpr int kSyncDrove = 2;
int OnHostSync(ThreadSlot* slot, uint32_t kind);

// What the shim inferred, for reports.
struct BoundaryReport {
  uint64_t boundaries = 0;
  uint32_t confidence_pct = 0;
  int period_segments = 0;
  uint32_t launches_per_period = 0;
  bool explicit_marks = false;
};
BoundaryReport CurrentBoundaryReport();

}  // namespace gandiva::shim

#endif  // GANDIVA_SHIM_JOB_LINK_H_
