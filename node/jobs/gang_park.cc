// The gang park decision; see gang_park.h for the protocol and why it is safe.
#include "jobs/gang_park.h"

#include <algorithm>

namespace gandiva::controller {

uint64_t FirstParkTarget(const std::vector<RankView>& ranks) {
  uint64_t furthest = 0;
  for (const RankView& r : ranks) furthest = std::max(furthest, r.count);
  return furthest + 1;
}

GangParkDecision DecideGangPark(const std::vector<RankView>& ranks, uint64_t target) {
  if (ranks.empty()) return {};
  uint64_t furthest = 0;
  bool all_parked = true;
  for (const RankView& r : ranks) {
    // A rank that exited cannot park: the gang is ending (or failing), not parking.
    if (r.state == RankView::kExited) return {};
    furthest = std::max(furthest, r.count);
    all_parked = all_parked && r.state == RankView::kParked;
  }
  bool behind = false;  // a parked rank waits below a rank that went further
  bool past = false;    // a running rank passed T without parking: it stops later
  for (const RankView& r : ranks) {
    if (r.state == RankView::kParked && r.count < furthest) behind = true;
    // A starting rank has passed no boundary: it parks at its first one (T = 0)
    // or runs up to T; only a running rank can have gone past T.
    if (r.state == RankView::kRunning && target != 0 && r.count >= target) past = true;
  }
  if (behind || past) {
    const uint64_t raised = furthest + 1;
    // Never lower T: ranks may already be running up to it.
    return {GangParkDecision::kRaise, std::max(raised, target), 0};
  }
  // Parked at one count, and at or past T: no rank will leave its park.
  if (all_parked && furthest >= target) return {GangParkDecision::kParked, 0, furthest};
  return {};
}

}  // namespace gandiva::controller
