// Period detection over segment hashes; see period_detector.h for the model.
#include "boundary/period_detector.h"

#include <bit>

namespace gandiva::shim {

bool PeriodDetector::OnSync(uint32_t kind) {
  const uint64_t h = Mix(segment_hash_ ^ (uint64_t{kind} << 32) ^ segment_launches_);
  const uint64_t i = segments_++;
  hash_[i % kHistory] = h;
  launches_[i % kHistory] = segment_launches_;
  work_[i % kHistory] = segment_work_;
  segment_hash_ = 0;
  segment_launches_ = 0;
  segment_work_ = 0;

  // Run lengths for every candidate period, also while locked (to re-lock quickly).
  for (int p = 1; p <= kMaxPeriod; ++p) {
    if (i >= static_cast<uint64_t>(p) && At(i - p) == h) {
      if (run_[p] < 0xffff) ++run_[p];
    } else {
      run_[p] = 0;
    }
  }

  if (!locked()) {
    TryLock();
    if (!locked()) return false;
    // Lock() counted the boundaries already in the history, this one included.
    return WindowMatches(segments_) && last_boundary_segment_ == segments_;
  }

  if (WindowMatches(segments_)) {
    const bool clean = segments_ - last_boundary_segment_ == static_cast<uint64_t>(period_);
    clean_bits_ = (clean_bits_ << 1 | (clean ? 1u : 0u)) & ((1u << kConfidenceWindow) - 1);
    if (window_filled_ < kConfidenceWindow) ++window_filled_;
    last_boundary_segment_ = segments_;
    ++boundaries_;
    return true;
  }
  // The loop changed (evaluation, a new phase): forget the period and look again.
  if (segments_ - last_boundary_segment_ > static_cast<uint64_t>(4 * period_)) Unlock();
  return false;
}

bool PeriodDetector::WindowMatches(uint64_t end) const {
  if (end < static_cast<uint64_t>(period_)) return false;
  for (int k = 0; k < period_; ++k)
    if (At(end - period_ + k) != pattern_[k]) return false;
  return true;
}

void PeriodDetector::TryLock() {
  for (int p = 1; p <= kMaxPeriod; ++p) {
    if (run_[p] < (kLockRepeats - 1) * p) continue;
    // The shortest repeating period decides: without device work it is start-up
    // traffic (weights copied in), and so is every multiple of it.
    uint32_t work = 0;
    for (int k = 1; k <= p; ++k) work += work_[(segments_ - k) % kHistory];
    if (work >= kMinKernelWork) Lock(p);
    return;
  }
}

void PeriodDetector::Lock(int p) {
  // Canonical phase: the rotation starting with the heaviest segment (first such).
  const uint64_t first = segments_ - p;
  int start = 0;
  uint32_t heaviest = 0;
  for (int k = 0; k < p; ++k) {
    const uint32_t n = launches_[(first + k) % kHistory];
    if (k == 0 || n > heaviest) {
      heaviest = n;
      start = k;
    }
  }
  // Fix the phase by the pattern's content, not by where the run happened to start:
  // among equally heavy segments, pick the rotation with the largest hash sequence.
  for (int k = 0; k < p; ++k) {
    if (launches_[(first + k) % kHistory] != heaviest || k == start) continue;
    for (int j = 0; j < p; ++j) {
      const uint64_t a = At(first + (k + j) % p), b = At(first + (start + j) % p);
      if (a != b) {
        if (a > b) start = k;
        break;
      }
    }
  }
  period_ = p;
  launches_per_period_ = 0;
  for (int k = 0; k < p; ++k) {
    pattern_[k] = At(first + (start + k) % p);
    launches_per_period_ += launches_[(first + (start + k) % p) % kHistory];
  }
  // Count the boundaries already seen: windows inside the repeating run that match.
  uint64_t span = static_cast<uint64_t>(run_[p]) + p;
  if (span > kHistory) span = kHistory;
  for (uint64_t end = segments_ - span + p; end <= segments_; ++end) {
    // Boundaries counted before an earlier unlock are not counted twice.
    if (end <= last_boundary_segment_ || !WindowMatches(end)) continue;
    ++boundaries_;
    clean_bits_ = (clean_bits_ << 1 | 1u) & ((1u << kConfidenceWindow) - 1);
    if (window_filled_ < kConfidenceWindow) ++window_filled_;
    last_boundary_segment_ = end;
  }
}

void PeriodDetector::Unlock() {
  period_ = 0;
  clean_bits_ = 0;
  window_filled_ = 0;
}

uint32_t PeriodDetector::confidence_pct() const {
  if (!locked() || window_filled_ == 0) return 0;
  const uint32_t denom = window_filled_ < 8 ? 8 : window_filled_;
  return 100u * static_cast<uint32_t>(std::popcount(clean_bits_)) / denom;
}

}  // namespace gandiva::shim
