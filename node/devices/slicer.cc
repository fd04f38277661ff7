// Round-robin time slicing at iteration boundaries; see slicer.h.
#include "devices/slicer.h"

#include <algorithm>
#include <cstdint>

namespace gandiva::controller {

void Slicer::AddJob(uint64_t job, double weight, uint64_t devices) {
  Entry e;
  e.weight = weight > 0 ? weight : 1.0;
  e.state = JobState::kStopping;
  e.devices = devices ? devices : 1;
  jobs_[job] = e;
}

uint64_t Slicer::DevicesOf(uint64_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.devices;
}

std::vector<int> Slicer::ActivePerDevice() const {
  std::vector<int> active(kMaxDevices, 0);
  for (const auto& [id, e] : jobs_)
    if (Active(e)) Count(active, e.devices, 1);
  return active;
}

bool Slicer::CanStart(uint64_t job, const std::vector<int>& active) const {
  const uint64_t devices = jobs_.at(job).devices;
  if (AnyAbove(active, devices, capacity_ - 1)) return false;  // a device is full
  return !AnyAbove(active, devices, 0) || FitsBeside(job);     // alone, or fits beside
}

void Slicer::RemoveJob(uint64_t job) {
  jobs_.erase(job);
  queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
}

void Slicer::SetWeight(uint64_t job, double weight) {
  auto it = jobs_.find(job);
  if (it != jobs_.end() && weight > 0) it->second.weight = weight;
}

void Slicer::Hold(uint64_t job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  Entry& e = it->second;
  switch (e.state) {
    case JobState::kRunning:
      e.state = JobState::kStopping;
      e.suspend_sent = false;
      e.hold_on_park = true;
      break;
    case JobState::kStopping:
    case JobState::kUnmanaged:
      e.hold_on_park = true;
      break;
    case JobState::kWaiting:
      queue_.erase(std::remove(queue_.begin(), queue_.end(), job), queue_.end());
      e.state = JobState::kHeld;
      break;
    case JobState::kHeld:
      break;
  }
}

void Slicer::Release(uint64_t job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  Entry& e = it->second;
  if (e.state == JobState::kHeld) {
    e.state = JobState::kWaiting;
    queue_.push_back(job);
  } else if (AwaitingPark(e)) {
    e.hold_on_park = false;
  }
}

bool Slicer::IsHeld(uint64_t job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return false;
  const Entry& e = it->second;
  return e.state == JobState::kHeld || (AwaitingPark(e) && e.hold_on_park);
}

void Slicer::OnParked(uint64_t job, uint64_t now) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  Entry& e = it->second;
  if (!AwaitingPark(e)) return;
  e.never_parked = false;
  if (e.hold_on_park) {
    e.state = JobState::kHeld;
    e.hold_on_park = false;
  } else {
    e.state = JobState::kWaiting;
    queue_.push_back(job);
  }
}

bool Slicer::Unmanage(uint64_t job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return false;
  Entry& e = it->second;
  if (e.state != JobState::kStopping || !e.never_parked) return false;
  e.state = JobState::kUnmanaged;  // its suspend request stays: it parks at a late first boundary
  return true;
}

std::vector<SliceAction> Slicer::Tick(uint64_t now) {
  std::vector<SliceAction> actions;
  for (auto& [id, e] : jobs_) {
    if (e.state == JobState::kStopping && !e.suspend_sent) {
      actions.push_back({SliceAction::kSuspend, id});
      e.suspend_sent = true;
    }
  }
  TrimToCapacity(actions);
  // Free slots first (packing), for waiting jobs that fit beside the running
  // ones, in queue order. A job that cannot start keeps its devices from the
  // jobs behind it: it waits for its turn instead of being passed over.
  std::vector<int> active = ActivePerDevice();
  uint64_t kept = 0;  // devices kept for a waiting job ahead in the queue
  for (auto it = queue_.begin(); it != queue_.end();) {
    const uint64_t next = *it;
    Entry& e = jobs_[next];
    if ((e.devices & kept) != 0 || !CanStart(next, active)) {
      kept |= e.devices;
      ++it;
      continue;
    }
    it = queue_.erase(it);
    e.state = JobState::kRunning;
    e.slice_start = now;
    actions.push_back({SliceAction::kResume, next});
    Count(active, e.devices, 1);
  }
  // Slices that are up end at the job's next boundary, but only if someone
  // waits for one of its devices: as many ends as there are such waiters.
  std::vector<int> waiting(kMaxDevices, 0);
  for (uint64_t id : queue_) Count(waiting, jobs_[id].devices, 1);
  const std::vector<int> waiters = waiting;
  for (auto& [id, e] : jobs_) {
    if (e.state != JobState::kRunning || now < e.slice_start + SliceOf(e)) continue;
    // Alone on its devices (or everyone fits): a slice that is up simply starts again.
    if (!AnyAbove(waiters, e.devices, 0)) e.slice_start = now;
    if (!AnyAbove(waiting, e.devices, 0)) continue;
    e.state = JobState::kStopping;
    e.suspend_sent = true;
    actions.push_back({SliceAction::kSuspend, id});
    ForEachDevice(e.devices, [&](int d) { waiting[d] -= waiting[d] > 0; });
  }
  return actions;
}

void Slicer::TrimToCapacity(std::vector<SliceAction>& actions) {
  std::vector<std::pair<uint64_t, uint64_t>> running;  // (slice_start, job)
  for (const auto& [id, e] : jobs_)
    if (e.state == JobState::kRunning) running.emplace_back(e.slice_start, id);
  // Only running jobs count: one already stopping (or starting) is on its way to park.
  std::vector<int> active(kMaxDevices, 0);
  for (const auto& [start, id] : running) Count(active, jobs_[id].devices, 1);
  // Earliest slice first: the job that has run longest gives way.
  std::sort(running.begin(), running.end());
  for (const auto& [start, id] : running) {
    Entry& e = jobs_[id];
    if (!AnyAbove(active, e.devices, capacity_)) continue;
    e.state = JobState::kStopping;
    e.suspend_sent = true;
    actions.push_back({SliceAction::kSuspend, id});
    Count(active, e.devices, -1);
  }
}

void Slicer::SetFootprint(uint64_t job, uint64_t bytes) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) it->second.footprint = bytes;
}

void Slicer::SetMemoryCap(uint64_t job, uint64_t bytes) {
  auto it = jobs_.find(job);
  if (it != jobs_.end()) it->second.memory_cap = bytes;
}

bool Slicer::FitsBeside(uint64_t job) const {
  if (memory_limit_ == 0) return true;
  const Entry& j = jobs_.at(job);
  bool fits = true;
  ForEachDevice(j.devices, [&](int d) {
    uint64_t total = Reserved(j);
    for (const auto& [id, e] : jobs_)
      if (id != job && Active(e) && (e.devices >> d & 1)) total += Reserved(e);
    fits &= total <= memory_limit_;
  });
  return fits;
}

bool Slicer::FitTogether(const std::vector<uint64_t>& jobs) const {
  if (memory_limit_ == 0) return true;
  std::vector<uint64_t> total(kMaxDevices, 0);
  for (uint64_t id : jobs)
    if (auto it = jobs_.find(id); it != jobs_.end())
      ForEachDevice(it->second.devices, [&](int d) { total[d] += Reserved(it->second); });
  return std::all_of(total.begin(), total.end(), [&](uint64_t t) { return t <= memory_limit_; });
}

std::vector<uint64_t> Slicer::RunningAlone() const {
  // An unmanaged job holds no place, but it does run beside whoever runs.
  std::vector<int> active = ActivePerDevice();
  for (const auto& [id, e] : jobs_)
    if (e.state == JobState::kUnmanaged) Count(active, e.devices, 1);
  std::vector<uint64_t> alone;
  for (const auto& [id, e] : jobs_)
    if (e.state == JobState::kRunning && !AnyAbove(active, e.devices, 1)) alone.push_back(id);
  return alone;
}

bool Slicer::RunsAlone(uint64_t job) const {
  const std::vector<uint64_t> alone = RunningAlone();
  return std::find(alone.begin(), alone.end(), job) != alone.end();
}

uint64_t Slicer::NextDeadline() const {
  uint64_t waited_for = 0;  // devices a waiting job needs
  for (uint64_t id : queue_) waited_for |= jobs_.at(id).devices;
  if (waited_for == 0) return UINT64_MAX;
  uint64_t next = UINT64_MAX;
  for (const auto& [id, e] : jobs_)
    if (e.state == JobState::kRunning && (e.devices & waited_for) != 0)
      next = std::min(next, e.slice_start + SliceOf(e));
  return next;
}

std::vector<uint64_t> Slicer::JobsIn(JobState state) const {
  std::vector<uint64_t> out;
  for (const auto& [id, e] : jobs_)
    if (e.state == state) out.push_back(id);
  return out;
}

std::vector<uint64_t> Slicer::Running() const { return JobsIn(JobState::kRunning); }
std::vector<uint64_t> Slicer::Stopping() const { return JobsIn(JobState::kStopping); }
std::vector<uint64_t> Slicer::Unmanaged() const { return JobsIn(JobState::kUnmanaged); }

}  // namespace gandiva::controller
