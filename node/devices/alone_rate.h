// What a job's speed costs it on a shared device: its iteration time alone,
// learned whenever it runs alone on its device, and its current rate relative
// to that (rate_vs_alone). A pure object fed by the device loop with the job's
// profile ring (job/contract) and the time; unit-tested with a fake clock.
//
// Alone time. While the job is the only one running on its device (no other
// job running, stopping or starting there), each iteration it completes is an
// "alone" sample, except the first kSkipIterations after it became alone: the
// one that straddles the change (it may have started beside another job or
// right after a park) and one of warm-up (caches, a swapped-in working set).
// Its alone time is the median of the latest kKeepSamples samples, reported once
// there are kMinSamples. Time parked is never iteration time (the job's ring
// leaves it out), so a sliced job learns it during each of its slices.
//
// Rate. rate_vs_alone = iterations completed in the last window x alone time /
// the window's wall time: throughput over wall time against throughput alone,
// so a job sliced with one other counts its share (about 0.5), a packed one
// its slowdown, a job alone about 1.0. The window is the latest kWindowNs
// (at least kMinWindowNs of observations, from its first iteration on: the
// time it took to start is not training); parked time counts as wall time.
#ifndef GANDIVA_NODE_DEVICES_ALONE_RATE_H_
#define GANDIVA_NODE_DEVICES_ALONE_RATE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "gandiva/common/units.h"
#include "gandiva/contract/control_block.h"

namespace gandiva::controller {

class AloneRate {
 public:
  static constexpr uint64_t kSkipIterations = 2;
  static constexpr size_t kMinSamples = 3;
  static constexpr size_t kKeepSamples = 64;
  static constexpr uint64_t kWindowNs = 3000 * kMs;
  static constexpr uint64_t kMinWindowNs = 1000 * kMs;
  static constexpr uint64_t kSampleEveryNs = 100 * kMs;

  // The device loop calls this whenever the job's alone-ness may have changed
  // (before and after it resumes or adds another job) and on every pass: the
  // iterations completed since the previous call were alone iff `alone` was
  // true at the previous call. `alone`: the job is alone from now on.
  void Observe(uint64_t now, bool alone, const runtime::ProfileRing& profile);

  // Median alone iteration time, once known.
  std::optional<uint64_t> AloneNs() const;
  // Current rate vs alone (see above), once the alone time and a window are known.
  std::optional<double> RateVsAlone(uint64_t now, uint64_t iterations_now) const;
  // The alone samples kept (oldest first), for tests.
  const std::deque<uint64_t>& samples() const { return samples_; }

 private:
  void Harvest(const runtime::ProfileRing& profile, uint64_t iterations);

  bool alone_ = false;
  uint64_t first_alone_iteration_ = 0;  // iterations from this index on count, while alone
  uint64_t harvested_ = 0;              // iterations below this index were looked at
  std::deque<uint64_t> samples_;
  struct Progress {
    uint64_t at_ns;
    uint64_t iterations;
  };
  std::deque<Progress> progress_;  // what the job had done when, oldest first
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_DEVICES_ALONE_RATE_H_
