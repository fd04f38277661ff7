// Attach, gate slow path, inferred boundaries with explicit marks taking precedence.
#include "boundary/job_link.h"

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "gandiva/runtime/job_runtime.h"
#include "memory/device_checkpoint.h"
#include "memory/swap.h"

namespace gandiva::shim {
namespace {

using runtime::ControlBlock;
using runtime::JobRuntime;

constinit std::atomic<uint32_t> g_not_parked{runtime::kPhaseStarting};
std::atomic<ControlBlock*> g_cb{nullptr};
// The one thread whose detector drives JobRuntime::Boundary() (its first to lock).
std::atomic<ThreadSlot*> g_owner{nullptr};
// Explicit marks (gd_boundary, the Python hook) seen: inferred ones stop.
std::atomic<bool> g_explicit{false};
// profile.iterations right after our latest Boundary(); a change means someone else marks.
uint64_t g_expected_iterations = ~0ull;

void Publish(ControlBlock* cb, const PeriodDetector& d) {
  cb->auto_boundaries.store(d.boundaries(), std::memory_order_relaxed);
  cb->auto_boundary_confidence_pct.store(d.confidence_pct(), std::memory_order_relaxed);
}

// True while explicit boundaries are in use; detects them from the control block.
bool ExplicitMarksPresent(ControlBlock* cb) {
  if (g_explicit.load(std::memory_order_relaxed)) return true;
  uint32_t src = cb->boundary_source.load(std::memory_order_acquire);
  if (src == 0 && cb->boundary_source.compare_exchange_strong(src, 2)) return false;
  bool explicit_marks = src == 1;
  if (!explicit_marks && g_expected_iterations != ~0ull &&
      cb->profile.iterations.load(std::memory_order_acquire) != g_expected_iterations) {
    explicit_marks = true;  // another runtime copy (libgandiva.so, Python) recorded one
    cb->boundary_source.store(1, std::memory_order_release);
  }
  if (explicit_marks) {
    g_explicit.store(true, std::memory_order_relaxed);
    GD_LOG(kInfo, "shim: explicit iteration boundaries in use; inferred ones only reported");
  }
  return explicit_marks;
}

// The thread serving the current park, for threads without a slot of their own (the
// overflow slot is shared, so its flag cannot say which thread serves).
thread_local bool t_serving_park __attribute__((tls_model("initial-exec"))) = false;

void ServePark(bool serving) {
  t_serving_park = serving;
  ThreadSlot* s = CurrentThreadSlot();
  if (!s->shared) s->serving_park = serving;
}

void OnParkedHook(ControlBlock* cb) {
  ServePark(true);
  SwapParkHooks().on_parked(cb);
}

void OnResumingHook(ControlBlock* cb) {
  SwapParkHooks().on_resuming(cb);
  ServePark(false);
}

void DriveBoundary(ControlBlock* cb) {
  JobRuntime::Get().Boundary();
  g_expected_iterations = cb->profile.iterations.load(std::memory_order_acquire);
}

}  // namespace

constinit std::atomic<std::atomic<uint32_t>*> g_gate_phase{&g_not_parked};

void AttachJob() {
  JobRuntime& rt = JobRuntime::Get();
  rt.SetParkHooks(ParkHooks());
  ControlBlock* cb = rt.control_block();
  g_cb.store(cb, std::memory_order_release);
  g_gate_phase.store(&cb->phase, std::memory_order_release);
  // Before the program's first boundary (its first CUDA call is earlier), so that
  // a restore at that boundary finds the section.
  RegisterDeviceCheckpoint();
}

ControlBlock* JobControlBlock() { return g_cb.load(std::memory_order_acquire); }

runtime::ParkHooks ParkHooks() { return runtime::ParkHooks{&OnParkedHook, &OnResumingHook}; }

void GateSlow() {
  if (t_serving_park) return;  // the park's own work: waiting would wait for itself
  JobRuntime::Get().GateWait();
}

void CaptureGate() {
  if (t_serving_park) return;  // inside the park: nothing to wait for
  ControlBlock* cb = JobControlBlock();
  if (!cb || cb->request.load(std::memory_order_acquire) == runtime::kRequestRun) return;
  JobRuntime& rt = JobRuntime::Get();
  if (!rt.managed()) return;
  ThreadSlot* me = CurrentThreadSlot();
  if (g_owner.load(std::memory_order_acquire) == me && !g_explicit.load()) {
    // This thread drives the boundaries: waiting here would wait for itself, and the
    // capture would push the next boundary past its end. Park now, device drained.
    // (The profile gets one iteration split in two.)
    Real<HookId::cuCtxSynchronize>::Get()();
    DriveBoundary(cb);
    return;
  }
  // Another thread drives the boundaries: wait for the park (bounded, in case that
  // thread is itself waiting on this one), then gate like a launch.
  const uint64_t deadline = MonotonicNowNs() + 1'000'000'000ull;
  for (;;) {
    const uint32_t phase = cb->phase.load(std::memory_order_acquire);
    if (phase == runtime::kPhaseParked) break;
    if (cb->request.load(std::memory_order_acquire) == runtime::kRequestRun) return;
    const uint64_t now = MonotonicNowNs();
    if (now >= deadline) return;
    runtime::FutexWait(&cb->phase, phase, deadline - now);
  }
  rt.GateWait();
}

int OnHostSync(ThreadSlot* slot, uint32_t kind) {
  // A sync inside a park (a save function's copy) is no boundary: it would park again.
  if (slot->shared || slot->serving_park || t_serving_park) return 0;
  if (!slot->detector.OnSync(kind)) return 0;
  ThreadSlot* owner = g_owner.load(std::memory_order_acquire);
  if (owner == nullptr && g_owner.compare_exchange_strong(owner, slot)) owner = slot;
  if (owner != slot) return kSyncBoundary;
  ControlBlock* cb = JobControlBlock();
  if (!cb) return kSyncBoundary;
  Publish(cb, slot->detector);
  if (ExplicitMarksPresent(cb)) return kSyncBoundary;
  DriveBoundary(cb);
  return kSyncBoundary | kSyncDrove;
}

BoundaryReport CurrentBoundaryReport() {
  BoundaryReport r;
  ThreadSlot* owner = g_owner.load(std::memory_order_acquire);
  if (owner) {
    r.boundaries = owner->detector.boundaries();
    r.confidence_pct = owner->detector.confidence_pct();
    r.period_segments = owner->detector.period();
    r.launches_per_period = owner->detector.launches_per_period();
  }
  r.explicit_marks = g_explicit.load();
  return r;
}

}  // namespace gandiva::shim
