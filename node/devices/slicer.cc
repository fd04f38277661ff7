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
    if (Active(e))
      for (int d = 0; d < kMaxDevices; ++d)
        if (e.devices >> d & 1) ++active[d];
  return active;
}

bool Slicer::CanStart(uint64_t job, const std::vector<int>& active) const {
  const uint64_t devices = jobs_.at(job).devices;
  bool beside_others = false;
  for (int d = 0; d < kMaxDevices; ++d) {
    if (!(devices >> d & 1)) continue;
    if (active[d] >= capacity_) return false;
    beside_others |= active[d] > 0;
  }
  return !beside_others || FitsBeside(job);
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
  } else if (e.state == JobState::kStopping) {
    e.hold_on_park = false;
  }
}

bool Slicer::IsHeld(uint64_t job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return false;
  const Entry& e = it->second;
  return e.state == JobState::kHeld || (e.state == JobState::kStopping && e.hold_on_park);
}

void Slicer::OnParked(uint64_t job, uint64_t now) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.state != JobState::kStopping) return;
  Entry& e = it->second;
  if (e.hold_on_park) {
    e.state = JobState::kHeld;
    e.hold_on_park = false;
  } else {
    e.state = JobState::kWaiting;
    queue_.push_back(job);
  }
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
    for (int d = 0; d < kMaxDevices; ++d)
      if (e.devices >> d & 1) ++active[d];
  }
  // Slices that are up end at the job's next boundary, but only if someone
  // waits for one of its devices: as many ends as there are such waiters.
  std::vector<int> waiting(kMaxDevices, 0);
  for (uint64_t id : queue_)
    for (int d = 0; d < kMaxDevices; ++d)
      if (jobs_[id].devices >> d & 1) ++waiting[d];
  const std::vector<int> waiters = waiting;
  for (auto& [id, e] : jobs_) {
    if (e.state != JobState::kRunning || now < e.slice_start + SliceOf(e)) continue;
    bool wanted = false, waited_on = false;
    for (int d = 0; d < kMaxDevices; ++d) {
      if (!(e.devices >> d & 1)) continue;
      wanted |= waiting[d] > 0;
      waited_on |= waiters[d] > 0;
    }
    // Alone on its devices (or everyone fits): a slice that is up simply starts again.
    if (!waited_on) e.slice_start = now;
    if (!wanted) continue;
    e.state = JobState::kStopping;
    e.suspend_sent = true;
    actions.push_back({SliceAction::kSuspend, id});
    for (int d = 0; d < kMaxDevices; ++d)
      if ((e.devices >> d & 1) && waiting[d] > 0) --waiting[d];
  }
  return actions;
}

void Slicer::TrimToCapacity(std::vector<SliceAction>& actions) {
  std::vector<std::pair<uint64_t, uint64_t>> running;  // (slice_start, job)
  for (const auto& [id, e] : jobs_)
    if (e.state == JobState::kRunning) running.emplace_back(e.slice_start, id);
  // Only running jobs count: one already stopping (or starting) is on its way to park.
  std::vector<int> active(kMaxDevices, 0);
  for (const auto& [start, id] : running)
    for (int d = 0; d < kMaxDevices; ++d)
      if (jobs_[id].devices >> d & 1) ++active[d];
  // Earliest slice first: the job that has run longest gives way.
  std::sort(running.begin(), running.end());
  for (const auto& [start, id] : running) {
    Entry& e = jobs_[id];
    bool over = false;
    for (int d = 0; d < kMaxDevices; ++d) over |= (e.devices >> d & 1) && active[d] > capacity_;
    if (!over) continue;
    e.state = JobState::kStopping;
    e.suspend_sent = true;
    actions.push_back({SliceAction::kSuspend, id});
    for (int d = 0; d < kMaxDevices; ++d)
      if (e.devices >> d & 1) --active[d];
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
  for (int d = 0; d < kMaxDevices; ++d) {
    if (!(j.devices >> d & 1)) continue;
    uint64_t total = Reserved(j);
    for (const auto& [id, e] : jobs_)
      if (id != job && Active(e) && (e.devices >> d & 1)) total += Reserved(e);
    if (total > memory_limit_) return false;
  }
  return true;
}

bool Slicer::FitTogether(const std::vector<uint64_t>& jobs) const {
  if (memory_limit_ == 0) return true;
  for (int d = 0; d < kMaxDevices; ++d) {
    uint64_t total = 0;
    for (uint64_t id : jobs)
      if (auto it = jobs_.find(id); it != jobs_.end() && (it->second.devices >> d & 1))
        total += Reserved(it->second);
    if (total > memory_limit_) return false;
  }
  return true;
}

bool Slicer::RunsAlone(uint64_t job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.state != JobState::kRunning) return false;
  for (const auto& [id, e] : jobs_)
    if (id != job && Active(e) && (e.devices & it->second.devices) != 0) return false;
  return true;
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

std::vector<uint64_t> Slicer::Running() const {
  std::vector<uint64_t> out;
  for (const auto& [id, e] : jobs_)
    if (e.state == JobState::kRunning) out.push_back(id);
  return out;
}

std::vector<uint64_t> Slicer::Stopping() const {
  std::vector<uint64_t> out;
  for (const auto& [id, e] : jobs_)
    if (e.state == JobState::kStopping) out.push_back(id);
  return out;
}

}  // namespace gandiva::controller
