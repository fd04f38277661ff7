// How a device's jobs share it, and auto mode's choice between the two ways.
//
//  - slice: the jobs take turns (time slicing, capacity 1);
//  - pack: up to `capacity` jobs run at the same time;
//  - auto: gandivad measures both on the device's current jobs and keeps the better.
//
// ShareChooser is auto mode's decision, a pure state machine with an injected
// clock (the device loop feeds it; unit-tested with a fake clock). With two or
// more jobs that may run (not held, past their first boundary), it measures a
// window sliced, then a window packed, each after a short settling time, and
// compares the jobs' combined throughput: the sum over the jobs of
// iterations in the window x alone iteration time / window (the sum of their
// rate_vs_alone). It keeps the better mode (pack only if better by
// kPackMargin) until the set of jobs changes (one
// joins, leaves, is held or released) or kRecheckNs passes, then measures again.
// Slicing stays without measuring when the jobs' weights differ (only slicing
// gives unequal shares) or their device memory does not fit together.
#ifndef GANDIVA_NODE_DEVICES_SHARE_MODE_H_
#define GANDIVA_NODE_DEVICES_SHARE_MODE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gandiva/common/units.h"
#include "gandiva/protocol/enums.h"

namespace gandiva::controller {

using protocol::ShareMode;

inline constexpr int kDefaultPackCapacity = 2;
inline constexpr int kMaxPackCapacity = 16;
inline constexpr uint64_t kDefaultShareWindowMs = 3000;
inline constexpr uint64_t kMinShareWindowMs = 500;
inline constexpr uint64_t kMaxShareWindowMs = 60000;

// A job auto mode may measure: what it has done so far, and its alone time if known.
struct ShareCandidate {
  uint64_t job = 0;
  double weight = 1.0;
  uint64_t iterations = 0;
  std::optional<uint64_t> alone_ns;
};

// One decision of auto mode, as list_devices reports it.
struct ShareDecision {
  ShareMode chosen = ShareMode::kSlice;  // kSlice or kPack
  std::string reason;                    // "measured", "weights differ", "memory does not fit", ...
  std::vector<uint64_t> jobs;
  std::optional<double> slice_rate;  // sum of the jobs' rate_vs_alone, sliced
  std::optional<double> pack_rate;   // the same, packed
  double window_s = 0;               // each mode's measured window
  bool alone_estimated = false;  // some alone time was unknown: estimated from the sliced window
  uint64_t at_ns = 0;
};

class ShareChooser {
 public:
  static constexpr uint64_t kRecheckNs = 300'000 * kMs;  // 5 minutes
  // Packing is kept only if it beats slicing by this factor: within it the two
  // are not told apart on a busy machine, and slicing keeps each job's speed
  // predictable (the simulator's Gandiva policy uses the same 5 %).
  static constexpr double kPackMargin = 1.05;

  enum class Phase { kIdle, kSlice, kPack, kDecided };

  explicit ShareChooser(uint64_t window_ns = kDefaultShareWindowMs * kMs) : window_ns_(window_ns) {}
  void SetWindow(uint64_t window_ns) { window_ns_ = window_ns; }
  // Forget the measurement (auto mode left or entered): the next Tick starts over.
  void Reset();

  // Whether the device should pack now. `jobs`: those that may run, by id;
  // `fit_together`: whether their device memory fits together.
  bool Tick(uint64_t now, const std::vector<ShareCandidate>& jobs, bool fit_together);
  // When Tick next has something to do (a window ends), or UINT64_MAX.
  uint64_t NextDeadline() const;

  Phase phase() const { return phase_; }
  const char* PhaseName() const;
  const std::optional<ShareDecision>& decision() const { return decision_; }

 private:
  // Settling time after a mode change, before a window counts.
  uint64_t SettleNs() const { return window_ns_ / 4; }
  void Start(uint64_t now, const std::vector<ShareCandidate>& jobs);
  void Decide(uint64_t now, ShareMode mode, std::string reason);
  // Iterations of each job (in jobs_ order) now.
  static std::vector<uint64_t> Counts(const std::vector<ShareCandidate>& jobs);
  void Finish(uint64_t now, const std::vector<ShareCandidate>& jobs);

  uint64_t window_ns_;
  Phase phase_ = Phase::kIdle;
  std::vector<uint64_t> jobs_;  // the set measured or decided on
  std::vector<double> weights_;
  uint64_t phase_start_ns_ = 0;    // mode switched; the window opens SettleNs() later
  std::vector<uint64_t> at_open_;  // iterations when the current window opened
  bool window_open_ = false;
  uint64_t window_open_ns_ = 0;
  std::vector<uint64_t> slice_done_;  // iterations in the sliced window
  uint64_t slice_window_ns_ = 0;
  std::optional<ShareDecision> decision_;
};

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_DEVICES_SHARE_MODE_H_
