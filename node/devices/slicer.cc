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
  TrimToCapacity(actions);
  // Free slots first (packing), for waiting jobs that fit beside the running ones.
  while (active < capacity_ && !queue_.empty()) {
    const uint64_t next = queue_.front();
    if (active > 0 && !FitsBeside(next)) break;  // it waits for its turn instead
    queue_.pop_front();
    Entry& e = jobs_[next];
    e.state = JobState::kRunning;
    e.slice_start = now;
    actions.push_back({SliceAction::kResume, next});
    ++active;
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
  // Alone on the device (or everyone fits): a slice that is up simply starts again.
  if (queue_.empty()) {
    for (auto& [id, e] : jobs_)
      if (e.state == JobState::kRunning && now >= e.slice_start + SliceOf(e)) e.slice_start = now;
  }
  return actions;
}

void Slicer::TrimToCapacity(std::vector<SliceAction>& actions) {
  std::vector<std::pair<uint64_t, uint64_t>> running;  // (slice_start, job)
  for (const auto& [id, e] : jobs_)
    if (e.state == JobState::kRunning) running.emplace_back(e.slice_start, id);
  if (static_cast<int>(running.size()) <= capacity_) return;
  std::sort(running.begin(), running.end());
  const size_t excess = running.size() - static_cast<size_t>(capacity_);
  for (size_t i = 0; i < excess; ++i) {
    Entry& e = jobs_[running[i].second];
    e.state = JobState::kStopping;
    e.suspend_sent = true;
    actions.push_back({SliceAction::kSuspend, running[i].second});
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
  uint64_t total = Reserved(jobs_.at(job));
  for (const auto& [id, e] : jobs_)
    if (id != job && (e.state == JobState::kRunning || e.state == JobState::kStopping))
      total += Reserved(e);
  return total <= memory_limit_;
}

bool Slicer::FitTogether(const std::vector<uint64_t>& jobs) const {
  if (memory_limit_ == 0) return true;
  uint64_t total = 0;
  for (uint64_t id : jobs)
    if (auto it = jobs_.find(id); it != jobs_.end()) total += Reserved(it->second);
  return total <= memory_limit_;
}

uint64_t Slicer::Alone() const {
  uint64_t alone = 0;
  int active = 0;
  for (const auto& [id, e] : jobs_) {
    if (e.state != JobState::kRunning && e.state != JobState::kStopping) continue;
    ++active;
    if (e.state == JobState::kRunning) alone = id;
  }
  return active == 1 ? alone : 0;
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
