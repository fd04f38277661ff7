// The per-device loop thread and its bookkeeping; see device_loop.h.
#include "devices/device_loop.h"

#include <algorithm>

#include "gandiva/common/clock.h"
#include "gandiva/common/futex.h"
#include "gandiva/common/log.h"
#include "gandiva/common/units.h"

namespace gandiva::controller {

using runtime::ControlBlock;

namespace {
// While waiting for a job to park, look up at least this often (exits, API changes).
constexpr uint64_t kParkPollNs = 5 * kMs;
// How often an unmanaged job (no boundary yet) is looked at for a late first park.
constexpr uint64_t kUnmanagedPollNs = 100 * kMs;
}  // namespace

DeviceLoop::DeviceLoop(DeviceInfo info, uint64_t slice_ns, size_t max_switch_records)
    : info_(std::move(info)),
      devices_{info_},
      max_switch_records_(max_switch_records),
      slicer_(slice_ns, info_.capacity),
      share_mode_(info_.capacity > 1 ? ShareMode::kPack : ShareMode::kSlice),
      pack_capacity_(std::max(info_.capacity, kDefaultPackCapacity)) {
  slicer_.SetMemoryLimit(info_.memory_bytes);
}

DeviceLoop::~DeviceLoop() { Stop(); }

void DeviceLoop::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void DeviceLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_.exchange(true)) return;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  for (const auto& [id, m] : members_) Thaw(id);
}

void DeviceLoop::AddJob(uint64_t job, std::shared_ptr<ControlBlock> cb, double weight, bool held,
                        DeviceUsage usage, uint64_t devices) {
  std::lock_guard lock(mu_);
  members_[job] = Member{std::move(cb), usage, weight, {}};
  slicer_.AddJob(job, weight, devices);
  if (held) slicer_.Hold(job);
  ObserveAlone(MonotonicNowNs());  // sharing: whoever was alone is not any more
  wake_.notify_all();
}

int DeviceLoop::AddDevice(const DeviceInfo& device) {
  std::lock_guard lock(mu_);
  if (const int known = IndexOfLocked(device.name); known >= 0) return known;
  devices_.push_back(device);
  // One memory figure for all: a job across them may use as much on each.
  uint64_t memory = 0;
  for (const DeviceInfo& d : devices_)
    if (d.memory_bytes) memory = memory ? std::min(memory, d.memory_bytes) : d.memory_bytes;
  slicer_.SetMemoryLimit(memory);
  GD_LOG(kInfo, "%s: slices %s with it from now on", info_.name.c_str(), device.name.c_str());
  wake_.notify_all();
  return static_cast<int>(devices_.size()) - 1;
}

std::vector<std::string> DeviceLoop::DeviceNames() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const DeviceInfo& d : devices_) names.push_back(d.name);
  return names;
}

int DeviceLoop::IndexOf(const std::string& device) const {
  std::lock_guard lock(mu_);
  return IndexOfLocked(device);
}

int DeviceLoop::IndexOfLocked(const std::string& device) const {
  for (size_t i = 0; i < devices_.size(); ++i)
    if (devices_[i].name == device) return static_cast<int>(i);
  return -1;
}

std::vector<uint64_t> DeviceLoop::JobIds() const {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> ids;
  for (const auto& [id, m] : members_) ids.push_back(id);
  return ids;
}

std::vector<std::string> DeviceLoop::DevicesOfJob(uint64_t job) const {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  const uint64_t mask = slicer_.DevicesOf(job);  // 0: not on this loop
  for (size_t i = 0; i < devices_.size(); ++i)
    if (mask >> i & 1) names.push_back(devices_[i].name);
  return names;
}

ShareMode DeviceLoop::share_mode() const {
  std::lock_guard lock(mu_);
  return share_mode_;
}

size_t DeviceLoop::JobsOn(const std::string& device) const {
  std::lock_guard lock(mu_);
  const int index = IndexOfLocked(device);
  if (index < 0) return 0;
  return std::count_if(members_.begin(), members_.end(),
                       [&](const auto& kv) { return slicer_.DevicesOf(kv.first) >> index & 1; });
}

std::optional<DeviceMember> DeviceLoop::RemoveJob(uint64_t job) {
  std::lock_guard lock(mu_);
  auto it = members_.find(job);
  if (it == members_.end()) return std::nullopt;
  DeviceMember left{it->second.usage, slicer_.IsHeld(job)};
  left.usage.alone_ns = it->second.alone.AloneNs();  // sharing: kept once it ended
  if (left.usage.running_since_ns) {
    left.usage.device_time_ns = left.usage.DeviceTimeAt(MonotonicNowNs());
    left.usage.running_since_ns = 0;
  }
  Thaw(job);
  members_.erase(it);
  slicer_.RemoveJob(job);
  ObserveAlone(MonotonicNowNs());  // sharing
  if (last_parked_job_ == job) last_parked_job_ = 0;
  wake_.notify_all();
  return left;
}

void DeviceLoop::SetProcess(uint64_t job, int pid) {
  std::lock_guard lock(mu_);
  if (auto it = members_.find(job); it != members_.end()) it->second.pid = pid;
  wake_.notify_all();
}

Status DeviceLoop::RequestTransfer(uint64_t job, runtime::Request kind, const std::string& target) {
  std::lock_guard lock(mu_);
  auto it = members_.find(job);
  if (it == members_.end())
    return NotFound("job " + std::to_string(job) + " is not on " + info_.name + "'s loop");
  Thaw(job);  // under mu_: the loop cannot stop it again before the request is stored
  if (!runtime::RequestTransfer(it->second.cb.get(), kind, target.c_str()))
    return InvalidArgument("transfer target too long: " + target);
  return Status::Ok();
}

void DeviceLoop::Awaken(uint64_t job) {
  std::lock_guard lock(mu_);
  auto it = members_.find(job);
  if (it == members_.end()) return;
  Thaw(job);
  it->second.awake = true;
}

void DeviceLoop::SetHeld(uint64_t job, bool held) {
  std::lock_guard lock(mu_);
  if (held)
    slicer_.Hold(job);
  else
    slicer_.Release(job);
  wake_.notify_all();
}

bool DeviceLoop::Unmanage(uint64_t job) {
  std::lock_guard lock(mu_);
  if (!slicer_.Unmanage(job)) return false;
  GD_LOG(kWarn,
         "%s: job %llu marked no iteration boundary: it runs unsliced beside the others "
         "until it marks one",
         info_.name.c_str(), static_cast<unsigned long long>(job));
  ObserveAlone(MonotonicNowNs());  // sharing: it runs beside whoever runs
  wake_.notify_all();              // a job waiting for its devices may start now
  return true;
}

bool DeviceLoop::IsHeld(uint64_t job) const {
  std::lock_guard lock(mu_);
  return slicer_.IsHeld(job);
}

void DeviceLoop::SetWeight(uint64_t job, double weight) {
  std::lock_guard lock(mu_);
  slicer_.SetWeight(job, weight);
  if (auto it = members_.find(job); it != members_.end()) it->second.weight = weight;
}

void DeviceLoop::SetSlice(uint64_t slice_ns) {
  std::lock_guard lock(mu_);
  slicer_.SetSlice(slice_ns);
  wake_.notify_all();
}

void DeviceLoop::SetSwitchShare(double share) {
  std::lock_guard lock(mu_);
  switch_share_ = share > 0 && share < 1 ? share : 0;
  if (switch_share_ == 0) slicer_.SetMinSlice(0);
  wake_.notify_all();
}

void DeviceLoop::UpdateMinSlice(const SwitchRecord& s) {
  const uint64_t cost = s.swapped ? s.handover_ns : 0;
  swap_cost_ewma_ns_ = (swap_cost_ewma_ns_ + cost) / 2;
  if (switch_share_ == 0) return;
  // A slice of S after a hand-over of H costs H / (H + S) of the device's time.
  const uint64_t min_slice =
      static_cast<uint64_t>(swap_cost_ewma_ns_ * (1 - switch_share_) / switch_share_);
  if (min_slice > slicer_.slice_ns() && min_slice > slicer_.SliceNow() + slicer_.SliceNow() / 8)
    GD_LOG(kInfo,
           "%s: swapping at hand-overs takes %.1f ms: slices of %.0f ms keep it under %.0f%%",
           info_.name.c_str(), swap_cost_ewma_ns_ / 1e6, min_slice / 1e6, switch_share_ * 100);
  slicer_.SetMinSlice(min_slice);
}

DeviceUsage DeviceLoop::Usage(uint64_t job) const {
  std::lock_guard lock(mu_);
  auto it = members_.find(job);
  if (it == members_.end()) return DeviceUsage{};
  DeviceUsage usage = it->second.usage;
  FillRates(it->second, usage, MonotonicNowNs());  // sharing
  return usage;
}

size_t DeviceLoop::size() const {
  std::lock_guard lock(mu_);
  return slicer_.size();
}

DeviceSnapshot DeviceLoop::Snapshot(const std::string& device) {
  std::lock_guard lock(mu_);
  CompletePendingSwitch();
  const int index = device.empty() ? 0 : std::max(IndexOfLocked(device), 0);
  DeviceSnapshot s;
  s.info = devices_[index];
  s.slice_ms = slicer_.slice_ns() / kMs;
  s.slice_now_ms = slicer_.SliceNow() / kMs;
  for (uint64_t id : slicer_.Running())
    if (slicer_.DevicesOf(id) >> index & 1) s.running.push_back(id);
  for (const auto& [id, m] : members_) {
    if (!(slicer_.DevicesOf(id) >> index & 1)) continue;
    s.jobs.push_back(id);
    s.resident_bytes += m.cb->device_bytes.load();
  }
  if (auto it = switch_count_.find(s.info.name); it != switch_count_.end())
    s.switch_count = it->second;
  double handover_sum = 0;
  size_t handovers = 0;
  for (const auto& r : switches_)
    if (r.device == s.info.name) handover_sum += r.handover_ns, ++handovers;
  if (handovers) s.mean_handover_ms = handover_sum / handovers / 1e6;
  FillSharing(s);
  return s;
}

std::vector<SwitchRecord> DeviceLoop::Switches(size_t limit, const std::string& device) {
  std::lock_guard lock(mu_);
  CompletePendingSwitch();
  std::vector<SwitchRecord> out;
  for (auto it = switches_.rbegin(); it != switches_.rend() && out.size() < limit; ++it)
    if (device.empty() || it->device == device) out.push_back(*it);
  std::reverse(out.begin(), out.end());
  return out;
}

void DeviceLoop::CompletePendingSwitch() {
  if (!pending_switch_) return;
  SwitchRecord& s = *pending_switch_;
  auto it = members_.find(s.to);
  if (it == members_.end()) {
    pending_switch_.reset();
    return;
  }
  const uint64_t resumed = it->second.cb->resumed_at_ns.load(std::memory_order_acquire);
  if (resumed < s.at_ns) return;  // not running yet
  s.handover_ns = resumed - s.at_ns;
  UpdateMinSlice(s);
  switches_.push_back(s);
  ++switch_count_[s.device];
  if (switches_.size() > max_switch_records_) switches_.pop_front();
  GD_LOG(kDebug, "%s: job %llu -> job %llu in %.3f ms", info_.name.c_str(),
         static_cast<unsigned long long>(s.from), static_cast<unsigned long long>(s.to),
         s.handover_ns / 1e6);
  pending_switch_.reset();
}

void DeviceLoop::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    CollectParked();
    CompletePendingSwitch();
    const uint64_t now = MonotonicNowNs();
    UpdateSharing(now);
    const std::vector<SliceAction> actions = slicer_.Tick(now);
    for (const SliceAction& a : actions) CarryOut(a, now);
    if (!actions.empty()) ObserveAlone(MonotonicNowNs());  // sharing: who runs alone now
    QuietParked();  // after the resumes: the hand-over does not wait for it
    Sleep(lock);
  }
}

// Jobs that were asked to suspend and have parked (an unmanaged one at a late first boundary).
void DeviceLoop::CollectParked() {
  std::vector<uint64_t> asked = slicer_.Stopping();
  for (uint64_t id : slicer_.Unmanaged()) asked.push_back(id);
  for (uint64_t id : asked) {
    Member& m = members_.at(id);
    ControlBlock* cb = m.cb.get();
    if (cb->phase.load(std::memory_order_acquire) != runtime::kPhaseParked) continue;
    // Asked to leave the device's memory: parked only once the shim has copied it out.
    if (cb->swap_request.load() == runtime::kSwapOut &&
        cb->swap_state.load(std::memory_order_acquire) == runtime::kSwapResident)
      continue;
    bool swapped_out = false;
    if (cb->swap_request.load() == runtime::kSwapOut) {
      cb->swap_request.store(runtime::kSwapNone);
      if (cb->swap_state.load() == runtime::kSwapSwappedOut) {
        ++m.usage.swaps;
        swapped_out = true;
      } else {
        GD_LOG(kWarn, "job %llu could not swap out; its memory stays on %s",
               static_cast<unsigned long long>(id), info_.name.c_str());
      }
    }
    const uint64_t parked_at = cb->parked_at_ns.load(std::memory_order_relaxed);
    if (m.usage.running_since_ns) {
      m.usage.device_time_ns +=
          parked_at > m.usage.running_since_ns ? parked_at - m.usage.running_since_ns : 0;
      m.usage.running_since_ns = 0;
    }
    slicer_.OnParked(id, parked_at);
    last_parked_job_ = id;
    last_parked_at_ns_ = parked_at;
    last_parked_swapped_ = swapped_out;
  }
}

void DeviceLoop::CarryOut(const SliceAction& a, uint64_t now) {
  Member& m = members_.at(a.job);
  ControlBlock* cb = m.cb.get();
  if (a.kind == SliceAction::kSuspend) {
    const bool swap_out = MustSwapOut(m);
    if (swap_out) cb->swap_request.store(runtime::kSwapOut);
    runtime::RequestSuspend(cb);
    // The job next in line gets ready while this one finishes its iteration.
    if (!swap_out && m.usage.running_since_ns != 0) PreWakeNext(m);
    return;
  }
  CompletePendingSwitch();
  Thaw(a.job);
  m.awake = false;
  // A job swapped out comes back into device memory before it runs (the shim does it).
  const bool swap_in = cb->swap_state.load() == runtime::kSwapSwappedOut;
  if (swap_in) cb->swap_request.store(runtime::kSwapIn);
  runtime::RequestResume(cb);
  ++m.usage.slices;
  m.usage.running_since_ns = now;
  if (last_parked_job_ != 0 && last_parked_job_ != a.job)
    pending_switch_ = SwitchRecord{
        SwitchDevice(last_parked_job_, a.job), last_parked_job_, a.job, last_parked_at_ns_, 0,
        last_parked_swapped_ || swap_in};
  last_parked_job_ = 0;
}

std::string DeviceLoop::SwitchDevice(uint64_t from, uint64_t to) const {
  // A hand-over is recorded once, on a device both jobs use (the first), else
  // on the first device of the job that came.
  const uint64_t to_mask = slicer_.DevicesOf(to);
  const uint64_t shared = slicer_.DevicesOf(from) & to_mask;  // 0 if `from` left
  const uint64_t mask = shared ? shared : to_mask;
  for (size_t i = 0; i < devices_.size(); ++i)
    if (mask >> i & 1) return devices_[i].name;
  return info_.name;
}

// Sleeps until a stopping job parks, a slice ends, or someone wakes the loop.
void DeviceLoop::Sleep(std::unique_lock<std::mutex>& lock) {
  std::vector<uint64_t> stopping = slicer_.Stopping();
  if (!stopping.empty()) {
    std::shared_ptr<ControlBlock> cb = members_.at(stopping.front()).cb;
    const uint32_t phase = cb->phase.load(std::memory_order_acquire);
    lock.unlock();
    // Several stopping at once (packing, or devices sliced together): the
    // others are looked at every millisecond, not only when this one parks.
    const uint64_t poll = stopping.size() > 1 ? kMs : kParkPollNs;
    if (phase != runtime::kPhaseParked) runtime::FutexWait(&cb->phase, phase, poll);
    lock.lock();
    return;
  }
  uint64_t deadline = std::min(slicer_.NextDeadline(), SharingDeadline(MonotonicNowNs()));
  if (pending_switch_) deadline = std::min(deadline, MonotonicNowNs() + kParkPollNs);
  if (!slicer_.Unmanaged().empty())
    deadline = std::min(deadline, MonotonicNowNs() + kUnmanagedPollNs);
  if (deadline == UINT64_MAX) {
    wake_.wait_for(lock, std::chrono::seconds(1));
  } else {
    const uint64_t t = MonotonicNowNs();
    if (deadline > t) wake_.wait_for(lock, std::chrono::nanoseconds(deadline - t));
  }
}

void DeviceLoop::PreWakeNext(const Member& outgoing) {
  // Worth a spinning core only when the outgoing job will park soon: within
  // about one of its iterations, and short ones at that. Never on a CPU device:
  // there the spinning job takes a core from the one finishing its iteration,
  // up to 2 ms per switch, to save a wake-up of tens of microseconds.
  constexpr uint64_t kMaxSpinNs = 2 * kMs;
  if (info_.kind == protocol::DeviceKind::kCpu) return;
  const uint64_t next = slicer_.NextWaiting();
  if (next == 0) return;
  const uint64_t iteration = outgoing.cb->profile.ewma_ns.load(std::memory_order_relaxed);
  const uint64_t spin = iteration + iteration / 2 + 50'000;
  if (iteration == 0 || spin > kMaxSpinNs) return;
  Thaw(next);
  runtime::PreWake(members_.at(next).cb.get(), spin);
}

// ---- Quiet parked jobs ----
// A parked job issues no work, but its process's other threads and children
// may (BLAS and OpenMP pools spinning down, DataLoader workers prefetching).
// A job that is parked and stays so (waiting its turn or held) is stopped
// with its process tree; it is continued (Thaw) before anything asks it to act
// again: a resume, a pre-wake, a transfer, leaving the device, the loop
// stopping, a signal (Awaken). A job with a request of any kind pending, a
// transfer under way or a swap to carry out is never stopped.
void DeviceLoop::QuietParked() {
  if (!freezer_ || !freezer_->enabled()) return;
  for (auto& [id, m] : members_) {
    const auto state = slicer_.state(id);
    if (m.pid <= 0 || m.awake ||
        (state != Slicer::JobState::kWaiting && state != Slicer::JobState::kHeld))
      continue;
    const ControlBlock* cb = m.cb.get();
    if (cb->phase.load(std::memory_order_acquire) != runtime::kPhaseParked ||
        cb->request.load() != runtime::kRequestSuspend ||
        cb->transfer_state.load() == runtime::kTransferBusy || cb->prewake_spin_ns.load() != 0 ||
        cb->swap_request.load() != runtime::kSwapNone || freezer_->IsFrozen(id))
      continue;
    if (Status s = freezer_->Freeze(id, m.pid); !s.ok())
      GD_LOG(kDebug, "job %llu not stopped: %s", static_cast<unsigned long long>(id),
             s.ToString().c_str());
  }
}

void DeviceLoop::Thaw(uint64_t job) {
  if (freezer_) freezer_->Thaw(job);
}

uint64_t DeviceLoop::ResidentBytes() const {
  uint64_t resident = 0;
  for (const auto& [id, m] : members_) resident += m.cb->device_bytes.load();
  return resident;
}

bool DeviceLoop::MustSwapOut(const Member& outgoing) const {
  // Jobs time-sliced on one device keep their memory there while parked, as long
  // as it fits. When it does not, the job leaving the device makes room for the
  // one coming next (its memory goes to host, at the same device addresses).
  if (info_.memory_bytes == 0 || outgoing.cb->pid.load() <= 0) return false;
  if (outgoing.cb->device_bytes.load() == 0) return false;  // nothing to move (a CPU job)
  const uint64_t resident = ResidentBytes();
  if (resident == 0) return false;  // not a GPU job (or no tracked memory)
  const uint64_t next = slicer_.NextWaiting();
  const uint64_t incoming = next ? members_.at(next).cb->swapped_bytes.load() : 0;
  return resident + incoming > info_.memory_bytes;
}

}  // namespace gandiva::controller
