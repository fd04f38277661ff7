// One device's time slicing, carried out: the Slicer's decisions turned into
// suspend and resume requests on the jobs' control blocks, the hand-overs
// recorded, device memory swapped when jobs do not fit together, and the next
// job pre-woken when the outgoing one is about to park.
//
// A loop starts with one device. When a job spans several devices, the node
// joins their loops into one (JoinDevices in node.cc): this loop then slices
// all of them, each job on its own devices (a mask of this loop's device
// indices), so that the job across devices and the jobs on each of them take
// turns as the slicer decides (slicer.h: they switch together). Devices sliced
// together share one slice length and one share mode; each keeps its own
// capacity count, and jobs on different devices run side by side as before.
//
// Thread-safety: mu_ guards the slicer, the device's jobs and its switch
// records; the loop thread holds it except while it sleeps on a job's phase
// futex. Every public method takes mu_ briefly; none calls another component
// but the ProcessFreezer (whose lock is a leaf under mu_), so a device loop is
// a leaf in the node's lock order. The loop keeps each
// job's control block mapped (shared_ptr) and never looks into the job table.
#ifndef GANDIVA_NODE_DEVICES_DEVICE_LOOP_H_
#define GANDIVA_NODE_DEVICES_DEVICE_LOOP_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "devices/alone_rate.h"
#include "devices/devices.h"
#include "devices/share_mode.h"
#include "devices/slicer.h"
#include "gandiva/contract/control_block.h"
#include "gandiva/status.h"
#include "jobs/job.h"
#include "jobs/process_freezer.h"

namespace gandiva::controller {

// One hand-over on a device: `from` parked at at_ns, `to` started running
// handover_ns later.
struct SwitchRecord {
  std::string device;
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t at_ns = 0;
  uint64_t handover_ns = 0;
  bool swapped = false;  // memory moved: `from` swapped out, or `to` swapped in
};

// A device's figures for list_devices.
struct DeviceSnapshot {
  DeviceInfo info;
  uint64_t slice_ms = 0;
  uint64_t slice_now_ms = 0;  // in effect: longer than slice_ms when switching is costly
  std::vector<uint64_t> jobs;
  std::vector<uint64_t> running;
  uint64_t resident_bytes = 0;
  uint64_t switch_count = 0;
  double mean_handover_ms = 0;
  // Sharing: the mode set, the jobs that may run at once (1 in slice mode),
  // whether they may run at once now, and auto mode's phase and latest decision.
  ShareMode share_mode = ShareMode::kSlice;
  int capacity = 1;
  bool packing = false;
  std::string share_phase;
  std::optional<ShareDecision> share_decision;
  std::string mps;  // filled by the node: MPS on this device, "running" or why not
};

// A job leaving the device: what the loop measured of it and whether it was held.
struct DeviceMember {
  DeviceUsage usage;
  bool held = false;
};

class DeviceLoop {
 public:
  DeviceLoop(DeviceInfo info, uint64_t slice_ns, size_t max_switch_records);
  ~DeviceLoop();
  DeviceLoop(const DeviceLoop&) = delete;
  DeviceLoop& operator=(const DeviceLoop&) = delete;

  // The freezer that stops parked jobs' processes (none: jobs are never
  // stopped). Set before Start. See "Quiet parked jobs" in device_loop.cc.
  void SetFreezer(ProcessFreezer* freezer) { freezer_ = freezer; }
  void Start();
  // Stops the loop and continues every job it stopped.
  void Stop();

  // The job joins the device: it parks at its next boundary, then queues (or
  // stays parked when held). `usage` carries its figures over from another device.
  // `devices`: the devices it spans, a mask of this loop's indices (IndexOf);
  // the slicer keeps it (Slicer::DevicesOf).
  void AddJob(uint64_t job, std::shared_ptr<runtime::ControlBlock> cb, double weight, bool held,
              DeviceUsage usage = {}, uint64_t devices = 1);
  // Another device for this loop to slice (its jobs are added with AddJob);
  // returns its index. Only while none of this loop's jobs uses that index.
  int AddDevice(const DeviceInfo& device);
  // The devices this loop slices, index order; and one's index, or -1.
  std::vector<std::string> DeviceNames() const;
  int IndexOf(const std::string& device) const;
  // The jobs on this loop, and the names of the devices one spans.
  std::vector<uint64_t> JobIds() const;
  std::vector<std::string> DevicesOfJob(uint64_t job) const;
  // The job's process (its tree is what a park stops); 0 until known.
  void SetProcess(uint64_t job, int pid);
  // The job's device-memory cap (0: none), counted when jobs are packed (see
  // Slicer::SetMemoryCap).
  void SetMemoryCap(uint64_t job, uint64_t bytes);
  // Asks the parked job to checkpoint to / restore from `target`, continuing
  // its processes first (see runtime::RequestTransfer); NotFound if the job is
  // not on this device.
  Status RequestTransfer(uint64_t job, runtime::Request kind, const std::string& target);
  // Continues the job's processes and keeps them running until the job next
  // runs, so that a signal sent to it is acted on (gandiva kill).
  void Awaken(uint64_t job);
  // The job leaves the device (its processes continued); nullopt if it was not on it.
  std::optional<DeviceMember> RemoveJob(uint64_t job);
  void SetHeld(uint64_t job, bool held);
  // The job has marked no boundary in the node's wait for its first: it stops
  // holding its devices from the jobs sliced on them (Slicer::Unmanage). False
  // if it had parked before, or is not on this loop.
  bool Unmanage(uint64_t job);
  bool IsHeld(uint64_t job) const;
  void SetWeight(uint64_t job, double weight);
  void SetSlice(uint64_t slice_ns);
  // The share of the device's time that switching between jobs may cost, in
  // (0, 1); 0: slices are never lengthened. From each hand-over measured (the
  // outgoing job's park to the incoming one running: a swap of their memory
  // included), the slice becomes at least long enough for that share.
  void SetSwitchShare(double share);
  // pack: up to `capacity` jobs run at once; slice: they take turns; auto: measured
  // (windows of window_ns each), the better kept. See share_mode.h.
  void SetShareMode(ShareMode mode, int capacity, uint64_t window_ns);
  ShareMode share_mode() const;
  // The job's figures so far (zero if it is not on this device).
  DeviceUsage Usage(uint64_t job) const;
  size_t size() const;
  // Jobs on `device` (one of this loop's devices).
  size_t JobsOn(const std::string& device) const;
  // One device's figures: its jobs, its running jobs, its hand-overs. "": the first.
  DeviceSnapshot Snapshot(const std::string& device = "");
  // The latest `limit` hand-overs, oldest first; on `device` only, unless "".
  std::vector<SwitchRecord> Switches(size_t limit, const std::string& device = "");
  // The loop's first device (the kind is the same for all it slices).
  const DeviceInfo& info() const { return info_; }

 private:
  struct Member {
    std::shared_ptr<runtime::ControlBlock> cb;
    DeviceUsage usage;
    double weight = 1.0;
    AloneRate alone;  // its alone iteration time on this device, and rate against it
    int pid = 0;
    bool awake = false;  // never stopped until it next runs (Awaken)
  };
  // The name of one device a hand-over from `from` to `to` took place on.
  std::string SwitchDevice(uint64_t from, uint64_t to) const;
  int IndexOfLocked(const std::string& device) const;
  void Loop();
  // All below: mu_ held.
  void CollectParked();
  void CarryOut(const SliceAction& action, uint64_t now);
  void Sleep(std::unique_lock<std::mutex>& lock);
  void CompletePendingSwitch();
  uint64_t ResidentBytes() const;
  // Lets the job next in line spin-wait for its resume (see runtime::PreWake).
  void PreWakeNext(const Member& outgoing);
  // Stops the processes of parked jobs that stay parked; continues one.
  void QuietParked();
  void Thaw(uint64_t job);
  // Whether `outgoing`, being suspended, must take its memory off the device.
  bool MustSwapOut(const Member& outgoing) const;
  // Sharing (device_sharing.cc), mu_ held. Before each Tick: footprints, alone
  // times, auto mode's choice, the slicer's capacity.
  void UpdateSharing(uint64_t now);
  // Tells every member's AloneRate whether it is alone on the device from now on.
  void ObserveAlone(uint64_t now);
  std::vector<ShareCandidate> ShareCandidates() const;
  // When sharing next needs the loop awake (a sample, a window's end).
  uint64_t SharingDeadline(uint64_t now) const;
  void FillSharing(DeviceSnapshot& s) const;
  void FillRates(const Member& m, DeviceUsage& usage, uint64_t now) const;

  const DeviceInfo info_;
  std::vector<DeviceInfo> devices_;  // by index; [0] is info_
  const size_t max_switch_records_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  Slicer slicer_;
  std::map<uint64_t, Member> members_;
  std::deque<SwitchRecord> switches_;
  std::map<std::string, uint64_t> switch_count_;  // by device
  // The last park seen, and a resume that followed it whose start is not yet known.
  uint64_t last_parked_job_ = 0;
  uint64_t last_parked_at_ns_ = 0;
  bool last_parked_swapped_ = false;  // it swapped out as it parked
  std::optional<SwitchRecord> pending_switch_;
  // Switch cost: what the recent hand-overs cost in swaps (a hand-over that
  // moved memory costs its length, any other one nothing: it is what slicing
  // has always cost), as an EWMA of alpha 1/2, so that a pair that stops
  // swapping gets short slices back within a few switches; against the share
  // of the device's time it may take (SetSwitchShare).
  double switch_share_ = 0;
  uint64_t swap_cost_ewma_ns_ = 0;
  // Lengthens the slicer's slices so that swapping costs at most switch_share_.
  void UpdateMinSlice(const SwitchRecord& s);
  ProcessFreezer* freezer_ = nullptr;
  ShareMode share_mode_;
  int pack_capacity_;
  ShareChooser chooser_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_DEVICES_DEVICE_LOOP_H_
