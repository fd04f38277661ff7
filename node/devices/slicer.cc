// Round-robin time slicing at iteration boundaries; see slicer.h.
#include "devices/slicer.h"

#include <algorithm>
#include <cstdint>

namespace gandiva::controller {

void Slicer::AddJob(uint64_t job, double weight) {
  Entry e;
  e.weight = weight > 0 ? weight : 1.0;
  e.state = JobState::kStopping;
  jobs_[job] = e;
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
  int active = 0;
  for (auto& [id, e] : jobs_) {
    if (e.state == JobState::kStopping && !e.suspend_sent) {
      actions.push_back({SliceAction::kSuspend, id});
      e.suspend_sent = true;
    }
    if (e.state == JobState::kRunning || e.state == JobState::kStopping) ++active;
  }
  // Slices that are up end at the job's next boundary, but only if someone waits.
  size_t waiting = queue_.size();
  for (auto& [id, e] : jobs_) {
    if (waiting == 0) break;
    if (e.state == JobState::kRunning && now >= e.slice_start + SliceOf(e)) {
      e.state = JobState::kStopping;
      e.suspend_sent = true;
      actions.push_back({SliceAction::kSuspend, id});
      --waiting;
    }
  }
  // Alone on the device: a slice that is up simply starts again.
  if (queue_.empty()) {
    for (auto& [id, e] : jobs_)
      if (e.state == JobState::kRunning && now >= e.slice_start + SliceOf(e)) e.slice_start = now;
  }
  while (active < capacity_ && !queue_.empty()) {
    uint64_t next = queue_.front();
    queue_.pop_front();
    Entry& e = jobs_[next];
    e.state = JobState::kRunning;
    e.slice_start = now;
    actions.push_back({SliceAction::kResume, next});
    ++active;
  }
  return actions;
}

uint64_t Slicer::NextDeadline() const {
  if (queue_.empty()) return UINT64_MAX;
  uint64_t next = UINT64_MAX;
  for (const auto& [id, e] : jobs_)
    if (e.state == JobState::kRunning) next = std::min(next, e.slice_start + SliceOf(e));
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
