// DeviceLoop's share of packing: the share mode, auto mode's measurement, and
// the jobs' alone times and rates (share_mode.h, alone_rate.h). Kept apart from
// device_loop.cc, which carries out the slicer's decisions; every method here
// runs with mu_ held.
#include <algorithm>

#include "devices/device_loop.h"
#include "gandiva/common/clock.h"
#include "gandiva/common/log.h"

namespace gandiva::controller {

void DeviceLoop::SetShareMode(ShareMode mode, int capacity, uint64_t window_ns) {
  std::lock_guard lock(mu_);
  share_mode_ = mode;
  pack_capacity_ = std::clamp(capacity, 2, kMaxPackCapacity);
  chooser_.SetWindow(window_ns);
  chooser_.Reset();
  GD_LOG(kInfo, "%s: share mode %s%s", info_.name.c_str(),
         std::string(protocol::ToString(mode)).c_str(),
         mode == ShareMode::kSlice ? "" : (" x" + std::to_string(pack_capacity_)).c_str());
  wake_.notify_all();
}

void DeviceLoop::SetMemoryCap(uint64_t job, uint64_t bytes) {
  std::lock_guard lock(mu_);
  slicer_.SetMemoryCap(job, bytes);
  wake_.notify_all();
}

void DeviceLoop::UpdateSharing(uint64_t now) {
  for (const auto& [id, m] : members_)
    slicer_.SetFootprint(id, m.cb->device_bytes.load() + m.cb->swapped_bytes.load());
  ObserveAlone(now);
  int capacity = 1;
  if (share_mode_ == ShareMode::kPack) {
    capacity = pack_capacity_;
  } else if (share_mode_ == ShareMode::kAuto) {
    const std::vector<ShareCandidate> candidates = ShareCandidates();
    std::vector<uint64_t> ids;
    for (const auto& c : candidates) ids.push_back(c.job);
    const auto before = chooser_.decision() ? chooser_.decision()->at_ns : 0;
    if (chooser_.Tick(now, candidates, slicer_.FitTogether(ids))) capacity = pack_capacity_;
    if (const auto& d = chooser_.decision(); d && d->at_ns != before)
      GD_LOG(kInfo, "%s: auto keeps %s (%s; sliced %.3f, packed %.3f)", info_.name.c_str(),
             std::string(protocol::ToString(d->chosen)).c_str(), d->reason.c_str(),
             d->slice_rate.value_or(-1), d->pack_rate.value_or(-1));
  }
  slicer_.SetCapacity(capacity);
}

void DeviceLoop::ObserveAlone(uint64_t now) {
  const std::vector<uint64_t> alone = slicer_.RunningAlone();  // once: not a scan per job
  for (auto& [id, m] : members_)
    m.alone.Observe(now, std::find(alone.begin(), alone.end(), id) != alone.end(), m.cb->profile);
}

std::vector<ShareCandidate> DeviceLoop::ShareCandidates() const {
  // Jobs that may run: not held, past their first boundary, not gone.
  std::vector<ShareCandidate> out;
  for (const auto& [id, m] : members_) {
    const runtime::ControlBlock* cb = m.cb.get();
    if (slicer_.IsHeld(id) || cb->phase.load() == runtime::kPhaseExited) continue;
    const uint64_t iterations = cb->profile.iterations.load(std::memory_order_acquire);
    if (iterations == 0 && cb->park_count.load() == 0) continue;
    out.push_back({id, m.weight, iterations, m.alone.AloneNs()});
  }
  return out;
}

uint64_t DeviceLoop::SharingDeadline(uint64_t now) const {
  uint64_t deadline = members_.empty() ? UINT64_MAX : now + AloneRate::kSampleEveryNs;
  if (share_mode_ == ShareMode::kAuto) deadline = std::min(deadline, chooser_.NextDeadline());
  return deadline;
}

void DeviceLoop::FillSharing(DeviceSnapshot& s) const {
  s.share_mode = share_mode_;
  s.capacity = share_mode_ == ShareMode::kSlice ? 1 : pack_capacity_;
  s.packing = slicer_.capacity() > 1;
  s.share_phase = share_mode_ == ShareMode::kAuto ? chooser_.PhaseName() : "off";
  s.share_decision = chooser_.decision();
}

void DeviceLoop::FillRates(const Member& m, DeviceUsage& usage, uint64_t now) const {
  usage.alone_ns = m.alone.AloneNs();
  usage.rate_vs_alone =
      m.alone.RateVsAlone(now, m.cb->profile.iterations.load(std::memory_order_acquire));
}

}  // namespace gandiva::controller
