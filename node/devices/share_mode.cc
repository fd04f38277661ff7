// Auto mode's measurement and decision; see share_mode.h.
#include "devices/share_mode.h"

#include <cmath>

namespace gandiva::controller {

void ShareChooser::Reset() {
  phase_ = Phase::kIdle;
  jobs_.clear();
  weights_.clear();
  window_open_ = false;
}

bool ShareChooser::Tick(uint64_t now, const std::vector<ShareCandidate>& jobs, bool fit_together) {
  if (jobs.size() < 2) {  // nothing to share: nothing to measure
    Reset();
    return false;
  }
  std::vector<uint64_t> ids;
  std::vector<double> weights;
  for (const auto& j : jobs) ids.push_back(j.job), weights.push_back(j.weight);
  const bool measuring = phase_ == Phase::kSlice || phase_ == Phase::kPack;
  if (ids != jobs_ || weights != weights_ ||
      (phase_ == Phase::kDecided && now >= decision_->at_ns + kRecheckNs)) {
    Start(now, jobs);
    if (phase_ == Phase::kDecided) return decision_->chosen == ShareMode::kPack;
    // Memory cannot fit: the jobs keep taking turns (Start decided).
    if (!fit_together) Decide(now, ShareMode::kSlice, "memory does not fit");
  } else if (measuring && !fit_together) {
    Decide(now, ShareMode::kSlice, "memory does not fit");
  }
  if (phase_ == Phase::kSlice || phase_ == Phase::kPack) {
    if (!window_open_ && now >= phase_start_ns_ + SettleNs()) {
      at_open_ = Counts(jobs);
      window_open_ = true;
      window_open_ns_ = now;
    } else if (window_open_ && now >= window_open_ns_ + window_ns_) {
      if (phase_ == Phase::kSlice) {
        slice_done_ = Counts(jobs);
        for (size_t i = 0; i < slice_done_.size(); ++i) slice_done_[i] -= at_open_[i];
        slice_window_ns_ = now - window_open_ns_;
        phase_ = Phase::kPack;
        phase_start_ns_ = now;
        window_open_ = false;
      } else {
        Finish(now, jobs);
      }
    }
  }
  return phase_ == Phase::kPack ||
         (phase_ == Phase::kDecided && decision_->chosen == ShareMode::kPack);
}

void ShareChooser::Start(uint64_t now, const std::vector<ShareCandidate>& jobs) {
  jobs_.clear();
  weights_.clear();
  for (const auto& j : jobs) jobs_.push_back(j.job), weights_.push_back(j.weight);
  window_open_ = false;
  for (double w : weights_) {
    if (std::fabs(w - weights_.front()) > 1e-9) {
      Decide(now, ShareMode::kSlice, "weights differ");
      return;
    }
  }
  phase_ = Phase::kSlice;  // slicing first: each job's slices teach its alone time
  phase_start_ns_ = now;
}

void ShareChooser::Decide(uint64_t now, ShareMode mode, std::string reason) {
  ShareDecision d;
  d.chosen = mode;
  d.reason = std::move(reason);
  d.jobs = jobs_;
  d.at_ns = now;
  decision_ = std::move(d);
  phase_ = Phase::kDecided;
  window_open_ = false;
}

std::vector<uint64_t> ShareChooser::Counts(const std::vector<ShareCandidate>& jobs) {
  std::vector<uint64_t> out;
  for (const auto& j : jobs) out.push_back(j.iterations);
  return out;
}

void ShareChooser::Finish(uint64_t now, const std::vector<ShareCandidate>& jobs) {
  const uint64_t pack_window_ns = now - window_open_ns_;
  const double n = static_cast<double>(jobs.size());
  double slice_rate = 0, pack_rate = 0;
  bool estimated = false;
  for (size_t i = 0; i < jobs.size(); ++i) {
    double alone_ns = 0;
    if (jobs[i].alone_ns) {
      alone_ns = static_cast<double>(*jobs[i].alone_ns);
    } else if (slice_done_[i] > 0) {
      // Sliced, a job gets about 1/n of the device: its alone time is about that.
      alone_ns = static_cast<double>(slice_window_ns_) / (n * static_cast<double>(slice_done_[i]));
      estimated = true;
    } else {
      Decide(now, ShareMode::kSlice, "too few iterations to measure (window too short)");
      return;
    }
    slice_rate += static_cast<double>(slice_done_[i]) * alone_ns / slice_window_ns_;
    pack_rate += static_cast<double>(jobs[i].iterations - at_open_[i]) * alone_ns / pack_window_ns;
  }
  const bool pack = pack_rate > slice_rate * kPackMargin;
  Decide(now, pack ? ShareMode::kPack : ShareMode::kSlice, "measured");
  decision_->slice_rate = slice_rate;
  decision_->pack_rate = pack_rate;
  decision_->window_s = static_cast<double>(window_ns_) / 1e9;
  decision_->alone_estimated = estimated;
}

uint64_t ShareChooser::NextDeadline() const {
  switch (phase_) {
    case Phase::kSlice:
    case Phase::kPack:
      return window_open_ ? window_open_ns_ + window_ns_ : phase_start_ns_ + SettleNs();
    case Phase::kDecided:
      return decision_->at_ns + kRecheckNs;
    case Phase::kIdle:
      break;
  }
  return UINT64_MAX;
}

const char* ShareChooser::PhaseName() const {
  switch (phase_) {
    case Phase::kIdle:
      return "idle";
    case Phase::kSlice:
      return "measuring_slice";
    case Phase::kPack:
      return "measuring_pack";
    case Phase::kDecided:
      return "decided";
  }
  return "idle";
}

}  // namespace gandiva::controller
