// The per-device time slicer: which jobs run on a device, and for how long.
// A pure state machine with an injected clock: it never sleeps or touches a
// process; its caller (DeviceLoop) carries out the actions it returns and tells
// it when a job has parked. Unit-tested with a fake clock.
//
// Policy: round robin over the jobs parked and waiting, at most `capacity`
// running at once on each device (1: the jobs take turns, time slicing; more:
// packing, the jobs run at the same time). A waiting job joins the running ones
// only if their device memory fits together (footprints against the device's
// memory); otherwise it waits for its turn, as under slicing. A job's slice is
// slice_ns x its weight; when it is up and another job waits for one of its
// devices, the job is asked to suspend and its slice ends at its next iteration
// boundary (when it parks). The next waiting job is resumed at once.
// New jobs start by parking at their first boundary, then queue like the rest.
// Held jobs (suspended by a user) are never resumed until released.
//
// A new job that marks no boundary (an unmodified program gandiva cannot see
// iterate) would hold its devices forever, waiting for a park that never
// comes. Once the node has waited long enough for its first boundary
// (--boundary-wait-s), it is unmanaged: it runs on beside the sliced jobs and
// holds no place on its devices (capacity, memory). It stays asked to park, so
// should it mark a boundary after all, it parks there and queues like any job.
//
// Several devices, one slicer: a job may span devices (a data-parallel job on
// cpu0 and cpu1), given as a mask of the slicer's device indices (bit k:
// device k). Such a job runs only on all its devices at once, so they switch
// together: it starts when every one of them has room, and it parks on all of
// them at once (it is one job). A waiting job keeps the devices it needs from
// the jobs queued behind it, so a job that spans devices is not starved by
// single-device jobs slipping past it. With one device (mask 1) this is plain
// round robin.
#ifndef GANDIVA_NODE_DEVICES_SLICER_H_
#define GANDIVA_NODE_DEVICES_SLICER_H_

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace gandiva::controller {

struct SliceAction {
  enum Kind { kSuspend, kResume } kind;
  uint64_t job;
};

class Slicer {
 public:
  // kStopping: asked to park, holding its devices until it does (a new job,
  // until its first boundary). kUnmanaged: see above.
  enum class JobState { kRunning, kStopping, kWaiting, kHeld, kUnmanaged };

  Slicer(uint64_t slice_ns, int capacity) : slice_ns_(slice_ns), capacity_(capacity) {}

  // A new job on the devices of `devices` (a mask, bit k: device k); it is
  // asked to park at its first boundary (returned by Tick).
  void AddJob(uint64_t job, double weight, uint64_t devices = 1);
  uint64_t DevicesOf(uint64_t job) const;
  // Forget the job (exited, or moved to another device).
  void RemoveJob(uint64_t job);
  bool HasJob(uint64_t job) const { return jobs_.count(job) != 0; }
  void SetWeight(uint64_t job, double weight);
  void SetSlice(uint64_t slice_ns) { slice_ns_ = slice_ns; }
  uint64_t slice_ns() const { return slice_ns_; }
  // The shortest slice, whatever SetSlice says: switching costly jobs (a swap
  // of their memory at each hand-over) lengthens every slice so that switching
  // stays a small share of the device's time (DeviceLoop sets it). 0: none.
  void SetMinSlice(uint64_t ns) { min_slice_ns_ = ns; }
  // The slice in effect for a job of weight 1: the longer of the two.
  uint64_t SliceNow() const { return std::max(slice_ns_, min_slice_ns_); }
  // Jobs that may run at once on each device, >= 1. Lowering it suspends the
  // jobs over it (those whose slice started first) at the next Tick.
  void SetCapacity(int capacity) { capacity_ = capacity < 1 ? 1 : capacity; }
  int capacity() const { return capacity_; }
  // Each device's memory (0: unlimited, e.g. a CPU) and each job's footprint on
  // each of its devices (resident plus swapped out): a job joins running ones
  // only if it fits on every device it spans.
  void SetMemoryLimit(uint64_t bytes) { memory_limit_ = bytes; }
  void SetFootprint(uint64_t job, uint64_t bytes);
  // The job's device-memory cap (`gandiva run --gpu-memory`; 0: none). The shim lets
  // it grow up to the cap, so packing counts it at its cap at least: jobs whose caps
  // sum above the device's memory take turns (and swap) instead of running at once.
  void SetMemoryCap(uint64_t job, uint64_t bytes);
  // Whether these jobs' footprints fit together on every device.
  bool FitTogether(const std::vector<uint64_t>& jobs) const;
  // The jobs that run alone: running, and no other job running or stopping on
  // any of their devices. A job alone runs at its "alone" speed.
  std::vector<uint64_t> RunningAlone() const;
  bool RunsAlone(uint64_t job) const;
  // Hold: keep the job parked (user suspend). Release: let it queue again.
  void Hold(uint64_t job);
  void Release(uint64_t job);
  // Whether the job is held: parked for good, or to stay parked once it parks.
  // The one record of a hold on the node (the API's `held`).
  bool IsHeld(uint64_t job) const;

  // The job acknowledged a suspend and parked at `now`.
  void OnParked(uint64_t job, uint64_t now);
  // The job has marked no boundary since it joined, and the node waits no
  // longer: it gives up its place (kStopping -> kUnmanaged). False (no change)
  // for a job that has parked before, or is not stopping.
  bool Unmanage(uint64_t job);

  // Decides what to do at `now`: suspends for jobs whose slice is up (or that
  // must park), resumes for waiting jobs while there is room.
  std::vector<SliceAction> Tick(uint64_t now);

  // When Tick next has something to do by itself (a slice ending), or UINT64_MAX.
  uint64_t NextDeadline() const;

  JobState state(uint64_t job) const { return jobs_.at(job).state; }
  std::vector<uint64_t> Running() const;
  // The job that runs next when a slot frees, or 0.
  uint64_t NextWaiting() const { return queue_.empty() ? 0 : queue_.front(); }
  // Jobs asked to suspend that have not parked yet (holding their devices).
  std::vector<uint64_t> Stopping() const;
  // Jobs that marked no boundary in time, running unsliced (see above).
  std::vector<uint64_t> Unmanaged() const;
  size_t size() const { return jobs_.size(); }

 private:
  struct Entry {
    double weight = 1.0;
    JobState state = JobState::kStopping;
    bool suspend_sent = false;  // kStopping: the suspend action was returned already
    bool hold_on_park = false;  // kStopping, kUnmanaged: stay held when it parks
    bool never_parked = true;   // since it joined: its first boundary is still to come
    uint64_t slice_start = 0;   // kRunning
    uint64_t footprint = 0;     // device bytes, see SetFootprint
    uint64_t memory_cap = 0;    // see SetMemoryCap
    uint64_t devices = 1;       // mask of the devices it spans
  };
  static constexpr int kMaxDevices = 64;
  static bool Active(const Entry& e) {
    return e.state == JobState::kRunning || e.state == JobState::kStopping;
  }
  // Asked to park and not parked yet, holding its devices or not: a hold takes
  // effect when it parks.
  static bool AwaitingPark(const Entry& e) {
    return e.state == JobState::kStopping || e.state == JobState::kUnmanaged;
  }
  std::vector<uint64_t> JobsIn(JobState state) const;
  // Calls fn(d) for each device index d set in `mask`.
  template <typename Fn>
  static void ForEachDevice(uint64_t mask, Fn fn) {
    for (; mask != 0; mask &= mask - 1) fn(std::countr_zero(mask));
  }
  // Adds `delta` to counts[d] for each device d of `mask`.
  static void Count(std::vector<int>& counts, uint64_t mask, int delta) {
    ForEachDevice(mask, [&](int d) { counts[d] += delta; });
  }
  // Whether counts[d] > floor for some device d of `mask`.
  static bool AnyAbove(const std::vector<int>& counts, uint64_t mask, int floor) {
    bool above = false;
    ForEachDevice(mask, [&](int d) { above |= counts[d] > floor; });
    return above;
  }
  // Per device index: the jobs running or stopping on it.
  std::vector<int> ActivePerDevice() const;
  // What the job may hold on the device while it runs: its footprint, or its cap
  // when it has one and has not reached it yet.
  static uint64_t Reserved(const Entry& e) { return std::max(e.footprint, e.memory_cap); }
  // Whether `job` may join the running and stopping jobs on its devices:
  // room under capacity (from `active`) and memory.
  bool CanStart(uint64_t job, const std::vector<int>& active) const;
  bool FitsBeside(uint64_t job) const;
  // Capacity lowered: suspends running jobs over it, earliest slice first.
  void TrimToCapacity(std::vector<SliceAction>& actions);
  uint64_t SliceOf(const Entry& e) const { return static_cast<uint64_t>(SliceNow() * e.weight); }

  uint64_t slice_ns_;
  uint64_t min_slice_ns_ = 0;
  int capacity_;
  uint64_t memory_limit_ = 0;
  std::map<uint64_t, Entry> jobs_;
  std::deque<uint64_t> queue_;  // kWaiting jobs in round-robin order
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_DEVICES_SLICER_H_
