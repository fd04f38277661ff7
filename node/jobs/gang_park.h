// Parking a gang (a job of several processes, e.g. the ranks of a DDP job) at
// one iteration: the controller-side decision, as a pure function.
//
// Why: ranks of a data-parallel job meet in an allreduce every iteration. If
// rank 0 parks at boundary c while rank 1 has already passed it, rank 1 waits
// in iteration c+1's allreduce for a rank that is parked: the gang deadlocks
// (or the collective times out). So every rank must park at the same count.
//
// How: each rank's block has a park target T (park_at_boundary): a rank asked
// to suspend parks at its first boundary whose count is >= T, and a parked rank
// whose count is below T leaves its park and runs up to it. The controller
// stores T = max(counts) + 1 in every block, then the suspend. The stores to
// several blocks are not atomic, so a rank may pass T before it sees the
// suspend; then it parks later than the others, which wait at T. This function
// spots that (a parked rank behind another rank, or a running rank already at
// or past T) and answers "raise T to max + 1": the ranks parked below it leave
// and run up to it. Under DDP the ranks are at most one boundary apart (none
// can finish iteration c+1 before every rank has started it), so one raise
// settles the gang; for ranks that are not in lockstep it still converges,
// since every rank that has seen the suspend parks at exactly the new T.
#ifndef GANDIVA_NODE_JOBS_GANG_PARK_H_
#define GANDIVA_NODE_JOBS_GANG_PARK_H_

#include <cstdint>
#include <vector>

namespace gandiva::controller {

// One rank as the controller reads it off its block (phase, then count).
struct RankView {
  enum State { kStarting, kRunning, kParked, kExited } state = kStarting;
  uint64_t count = 0;  // boundaries passed with a measured iteration (profile.iterations)
};

struct GangParkDecision {
  enum Kind {
    kWait,    // ranks are on their way to T (or starting, or exiting): look again soon
    kRaise,   // set T = target in every block and wake the parked ranks
    kParked,  // every rank is parked at `count`, at or past T: the gang is parked
  } kind = kWait;
  uint64_t target = 0;  // kRaise: the new T
  uint64_t count = 0;   // kParked: the iteration every rank parked at
};

// While a suspend is requested with park target `target` (0: next boundary).
GangParkDecision DecideGangPark(const std::vector<RankView>& ranks, uint64_t target);

// The target a suspend of a running gang starts with: one past the furthest rank.
uint64_t FirstParkTarget(const std::vector<RankView>& ranks);

}  // namespace gandiva::controller

#endif  // GANDIVA_NODE_JOBS_GANG_PARK_H_
