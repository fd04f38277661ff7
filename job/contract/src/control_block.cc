// Control block initialisation; see control_block.h for the layout and rules.
#include "gandiva/contract/control_block.h"

#include <cstring>
#include <new>

namespace gandiva::runtime {

void InitControlBlock(ControlBlock* cb, uint64_t job_id, uint64_t lease_ns, const char* node) {
  std::memset(static_cast<void*>(cb), 0, sizeof(ControlBlock));
  new (cb) ControlBlock();  // atomics are value-initialised to zero
  cb->magic = kControlBlockMagic;
  cb->version = kControlBlockVersion;
  cb->job_id = job_id;
  cb->lease_ns = lease_ns;
  cb->gang_size = 1;
  std::strncpy(cb->node, node ? node : "", sizeof(cb->node) - 1);
}

}  // namespace gandiva::runtime

#include <algorithm>
#include <cstring>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"

namespace gandiva::runtime {

void RequestSuspend(ControlBlock* cb) {
  cb->request.store(kRequestSuspend, std::memory_order_release);
  // A gang's own block is watched by the node's gang thread (node/jobs/gang.h),
  // which sleeps on `request`; a job's block is read at its next boundary.
  if (cb->gang_rank == kGangLeader) FutexWakeAll(&cb->request);
}

void RequestResume(ControlBlock* cb) {
  cb->request.store(kRequestRun, std::memory_order_release);
  FutexWakeAll(&cb->request);
}

void PreWake(ControlBlock* cb, uint64_t spin_ns) {
  cb->prewake_spin_ns.store(spin_ns, std::memory_order_release);
  FutexWakeAll(&cb->request);
}

bool WaitForPhase(ControlBlock* cb, Phase phase, uint64_t timeout_ns) {
  const uint64_t deadline = MonotonicNowNs() + timeout_ns;
  for (;;) {
    uint32_t now_phase = cb->phase.load(std::memory_order_acquire);
    if (now_phase == phase) return true;
    uint64_t now = MonotonicNowNs();
    if (now >= deadline) return false;
    FutexWait(&cb->phase, now_phase, deadline - now);
  }
}

bool RequestTransfer(ControlBlock* cb, Request kind, const char* target) {
  const size_t n = std::strlen(target);
  if (n >= kTransferTargetSize) return false;
  std::memcpy(cb->transfer_target, target, n + 1);
  cb->transfer_state.store(kTransferIdle, std::memory_order_relaxed);
  cb->request.store(kind, std::memory_order_release);
  FutexWakeAll(&cb->request);
  return true;
}

TransferState WaitForTransfer(ControlBlock* cb, uint64_t timeout_ns,
                              const std::function<bool()>& give_up) {
  const uint64_t deadline = MonotonicNowNs() + timeout_ns;
  for (;;) {
    const uint32_t state = cb->transfer_state.load(std::memory_order_acquire);
    if (state == kTransferDone || state == kTransferFailed)
      return static_cast<TransferState>(state);
    const uint64_t now = MonotonicNowNs();
    if (now >= deadline || (give_up && give_up())) return static_cast<TransferState>(state);
    FutexWait(&cb->transfer_state, state, std::min<uint64_t>(deadline - now, 50'000'000));
  }
}

std::string TransferError(const ControlBlock* cb) {
  return std::string(cb->transfer_error, strnlen(cb->transfer_error, kTransferErrorSize));
}

void Heartbeat(ControlBlock* cb, uint64_t now_ns) {
  cb->heartbeat_ns.store(now_ns, std::memory_order_release);
}

void ReleaseForever(ControlBlock* cb) {
  cb->controller_gone.store(1, std::memory_order_release);
  RequestResume(cb);
}

}  // namespace gandiva::runtime
