// The per-job control block: one page of shared memory between a training job and
// its node controller (gandivad). Layout is versioned; both sides check magic+version.
//
// Thread-safety and ownership:
//  - Identity fields are written once by the controller before the job starts.
//  - `request`, `heartbeat_ns`, `controller_gone` are written by the controller only.
//  - `phase`, the park timestamps, the profile and the device-memory counters are
//    written by the job only (profile by the boundary thread only).
//  - Everything the other side reads is a lock-free atomic; readers tolerate a
//    slightly stale profile (statistics, not state).
//  - `request` and `phase` are futex words: the job sleeps on `request` while
//    parked, the controller sleeps on `phase` waiting for the park.
#ifndef GANDIVA_RUNTIME_CONTROL_BLOCK_H_
#define GANDIVA_RUNTIME_CONTROL_BLOCK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace gandiva::runtime {

inline constexpr uint32_t kControlBlockMagic = 0x42434447;  // "GDCB"
// 5: registered_states; 6: gangs (gang_rank/gang_size, park_at_boundary).
inline constexpr uint32_t kControlBlockVersion = 6;
// gang_rank of a gang's own block, which no process attaches to: the node's gang
// thread watches it (RequestSuspend wakes it) and carries requests to the ranks.
inline constexpr uint32_t kGangLeader = 0xffffffff;
inline constexpr size_t kProfileRingSize = 1024;  // iteration times kept for p50/p99

// What the controller asks of the job.
enum Request : uint32_t {
  kRequestRun = 0,
  kRequestSuspend = 1,  // park at the next iteration boundary until kRequestRun
  // While parked (a running job parks first): write the registered state to
  // transfer_target, report in transfer_state, then stay parked (the job sets
  // request back to kRequestSuspend).
  kRequestCheckpoint = 2,
  // While parked: read state from transfer_target into the registered state,
  // report in transfer_state, stay parked.
  kRequestRestore = 3,
};

// Progress of a checkpoint or restore, as the job reports it (a futex word).
enum TransferState : uint32_t {
  kTransferIdle = 0,
  kTransferBusy = 1,
  kTransferDone = 2,
  kTransferFailed = 3,  // transfer_error says why
};

inline constexpr size_t kTransferTargetSize = 512;
inline constexpr size_t kTransferErrorSize = 256;

// What the job is doing, as the job reports it.
enum Phase : uint32_t {
  kPhaseStarting = 0,  // process up, no boundary yet
  kPhaseRunning = 1,
  kPhaseParked = 2,  // parked at a boundary; issues no work
  kPhaseExited = 3,  // detached cleanly
};

// Iteration profile written at every boundary.
struct ProfileRing {
  std::atomic<uint64_t> iterations;                 // boundaries passed with a measured iteration
  std::atomic<uint64_t> last_boundary_ns;           // CLOCK_MONOTONIC of the latest boundary
  std::atomic<uint64_t> ewma_ns;                    // EWMA of iteration time, alpha = 1/8
  std::atomic<uint64_t> total_ns;                   // sum of all iteration times
  std::atomic<uint64_t> ring_ns[kProfileRingSize];  // iteration i at [i % size]
};

struct alignas(64) ControlBlock {
  // Identity: written by the controller before the job starts.
  uint32_t magic;
  uint32_t version;
  uint64_t job_id;
  uint64_t lease_ns;  // a parked job resumes itself when the heartbeat is older than this
  char node[32];
  // A gang (a job of several processes) has one block per rank: this is rank
  // gang_rank of gang_size. 0 of 1 for a job of one process.
  uint32_t gang_rank;
  uint32_t gang_size;

  // Controller -> job.
  alignas(64) std::atomic<uint32_t> request;
  std::atomic<uint32_t> controller_gone;  // set when the controller stops: never park again
  std::atomic<uint64_t> heartbeat_ns;     // CLOCK_MONOTONIC of the controller's last heartbeat
  std::atomic<uint64_t> prewake_spin_ns;  // see PreWake(); the job takes it (exchange 0)
  // Where a suspend takes effect: at the first boundary whose count
  // (profile.iterations) is >= this, or at the next boundary when 0. A parked
  // job whose count is below it leaves its park and runs up to it. Gangs use it
  // to park every rank at the same iteration (node/jobs/gang_park.h); stored
  // before `request`, read by the job only when `request` is not kRequestRun.
  std::atomic<uint64_t> park_at_boundary;

  // Job -> controller.
  alignas(64) std::atomic<uint32_t> phase;
  std::atomic<uint32_t> fail_open;  // 1 once the job resumed itself on an expired lease
  std::atomic<int32_t> pid;
  // Sections of registered state (checkpoint/registry.h), stored at the first
  // boundary and at every park: 0 there means a checkpoint would hold nothing,
  // and the controller refuses to migrate such a job.
  std::atomic<uint32_t> registered_states;
  std::atomic<uint64_t> park_count;
  std::atomic<uint64_t> parked_at_ns;   // when the job last parked
  std::atomic<uint64_t> resumed_at_ns;  // when the job last left a park
  std::atomic<uint64_t> parked_total_ns;

  // Iteration profiler.
  alignas(64) ProfileRing profile;

  // Device side, written by the CUDA shim (zero for CPU jobs).
  alignas(64) std::atomic<uint64_t> device_bytes;      // live tracked device memory
  std::atomic<uint64_t> device_allocations;            // live tracked allocations
  std::atomic<uint64_t> auto_boundaries;               // boundaries the shim inferred
  std::atomic<uint32_t> auto_boundary_confidence_pct;  // detector confidence, 0..100
  std::atomic<uint32_t> boundary_source;               // 0 none, 1 explicit, 2 inferred
  std::atomic<uint32_t> swap_request;   // controller -> job, see SwapRequest; acted on while parked
  std::atomic<uint32_t> swap_state;     // job -> controller, see SwapState
  std::atomic<uint64_t> swapped_bytes;  // device bytes currently held on the host

  // State transfer (checkpoint and migration). The controller writes
  // transfer_target before it stores kRequestCheckpoint/kRequestRestore; the
  // job writes the rest.
  alignas(
      64) char transfer_target[kTransferTargetSize];  // "file:/abs/path" or "sealed:/abs/socket"
  std::atomic<uint32_t> transfer_state;
  std::atomic<uint32_t> transfers;       // transfers completed or failed so far
  std::atomic<uint64_t> transfer_bytes;  // bytes of the last transfer
  std::atomic<uint64_t> transfer_ns;     // duration of the last transfer
  char transfer_error[kTransferErrorSize];

  // Set by a migration's destination controller while this process is only a
  // warm copy waiting for the job's state: if that controller goes away first,
  // the copy exits instead of failing open, so the job never trains twice.
  alignas(64) std::atomic<uint32_t> exit_if_orphaned;
};

// Device-memory swap, for jobs packed on a device whose memory they overflow.
// The controller sets swap_request together with a suspend (swap out) or a
// resume (swap in); the job's park hooks (the CUDA shim) act on it.
enum SwapRequest : uint32_t { kSwapNone = 0, kSwapOut = 1, kSwapIn = 2 };
enum SwapState : uint32_t { kSwapResident = 0, kSwapSwappedOut = 1, kSwapFailed = 2 };

static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex words must be 32-bit");

// Sets identity and zeroes the rest. Called by the controller on a fresh mapping,
// and by the job for its private block when it runs without a controller.
void InitControlBlock(ControlBlock* cb, uint64_t job_id, uint64_t lease_ns, const char* node);

}  // namespace gandiva::runtime

namespace gandiva::runtime {

// ---- Controller-side operations (gandivad, tests, benches) ----

// Asks the job to park at its next boundary. Cheap: one store, no syscall.
void RequestSuspend(ControlBlock* cb);
// Lets a parked (or about-to-park) job go: one store and one futex wake.
void RequestResume(ControlBlock* cb);
// A parked job that is next in line is woken early and spins (for at most
// spin_ns) watching `request`, so that when the running job parks and the
// controller resumes this one, it starts in microseconds instead of paying a
// sleeping CPU's wake-up (tens of µs, more in a VM). Used when the outgoing
// job's next boundary is expected within spin_ns.
void PreWake(ControlBlock* cb, uint64_t spin_ns);
// Sleeps until the job reports kPhaseParked (true) or timeout_ns passes (false).
bool WaitForPhase(ControlBlock* cb, Phase phase, uint64_t timeout_ns);
// Asks the job to checkpoint to / restore from `target` ("file:/path", or
// "sealed:/socket" for a migration) while parked; false if target does not fit.
bool RequestTransfer(ControlBlock* cb, Request kind, const char* target);
// Sleeps until the current transfer is done or failed (returns the state), or
// timeout_ns passes (returns kTransferBusy or kTransferIdle). `give_up`, if
// given, is asked at least every 50 ms; once it says so the wait returns what
// it saw (the caller tells that from a timeout by asking it again).
TransferState WaitForTransfer(ControlBlock* cb, uint64_t timeout_ns,
                              const std::function<bool()>& give_up = nullptr);
// Why the last transfer failed, as the job wrote it: read up to the field's
// end whether or not the job ended it with a NUL (the job's user may write
// anything there).
std::string TransferError(const ControlBlock* cb);
// Refreshes the lease that keeps parked jobs parked.
void Heartbeat(ControlBlock* cb, uint64_t now_ns);
// The controller is going away: every parked job resumes now and never parks again.
void ReleaseForever(ControlBlock* cb);

}  // namespace gandiva::runtime

#endif  // GANDIVA_RUNTIME_CONTROL_BLOCK_H_
