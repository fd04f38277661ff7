// The controller's decision for parking a gang at one iteration (pure function).
#include "jobs/gang_park.h"

#include <gtest/gtest.h>

namespace gandiva::controller {
namespace {

RankView Parked(uint64_t count) { return {RankView::kParked, count}; }
RankView Running(uint64_t count) { return {RankView::kRunning, count}; }
RankView Starting() { return {RankView::kStarting, 0}; }

TEST(GangParkTest, FirstTargetIsOnePastTheFurthestRank) {
  EXPECT_EQ(FirstParkTarget({Running(7), Running(8)}), 9u);
  EXPECT_EQ(FirstParkTarget({Starting(), Starting()}), 1u);
}

TEST(GangParkTest, ParkedWhenEveryRankParkedAtOneCountAtOrPastTheTarget) {
  const auto d = DecideGangPark({Parked(9), Parked(9)}, 9);
  EXPECT_EQ(d.kind, GangParkDecision::kParked);
  EXPECT_EQ(d.count, 9u);
  // Target 0 (a new job: park at the first boundary).
  EXPECT_EQ(DecideGangPark({Parked(0), Parked(0), Parked(0)}, 0).kind, GangParkDecision::kParked);
}

TEST(GangParkTest, WaitsWhileRanksRunUpToTheTarget) {
  // Rank 1 is one boundary behind, in the same iteration: it parks at 9 by itself.
  EXPECT_EQ(DecideGangPark({Parked(9), Running(8)}, 9).kind, GangParkDecision::kWait);
  EXPECT_EQ(DecideGangPark({Running(8), Running(8)}, 9).kind, GangParkDecision::kWait);
  // Starting ranks park at their first boundary (or run up to the target).
  EXPECT_EQ(DecideGangPark({Parked(0), Starting()}, 0).kind, GangParkDecision::kWait);
  EXPECT_EQ(DecideGangPark({Starting(), Starting()}, 1).kind, GangParkDecision::kWait);
}

TEST(GangParkTest, ParkedBelowARaisedTargetIsNotParkedYet) {
  // Both parked at 9 but the target moved to 10: they are about to leave.
  EXPECT_EQ(DecideGangPark({Parked(9), Parked(9)}, 10).kind, GangParkDecision::kWait);
  // One left already and runs to 10.
  EXPECT_EQ(DecideGangPark({Parked(9), Running(9)}, 10).kind, GangParkDecision::kWait);
}

TEST(GangParkTest, RaisesWhenARankPassedTheTargetBeforeSeeingTheSuspend) {
  // Rank 1 passed boundary 9 without parking: it now waits in iteration 10's
  // allreduce for rank 0, parked at 9. Deadlock unless rank 0 runs to 10.
  const auto d = DecideGangPark({Parked(9), Running(9)}, 9);
  EXPECT_EQ(d.kind, GangParkDecision::kRaise);
  EXPECT_EQ(d.target, 10u);
  // Both passed it: they park at 10 by themselves, and raising says the same.
  EXPECT_EQ(DecideGangPark({Running(9), Running(9)}, 9).target, 10u);
}

TEST(GangParkTest, RaisesWhenRanksParkedAtDifferentCounts) {
  // Rank 1 passed 9 and parked at 10 while rank 0 parked at 9.
  const auto d = DecideGangPark({Parked(9), Parked(10)}, 9);
  EXPECT_EQ(d.kind, GangParkDecision::kRaise);
  EXPECT_EQ(d.target, 11u);
  // Parked at first boundaries that differ (target 0).
  EXPECT_EQ(DecideGangPark({Parked(0), Parked(1)}, 0).target, 2u);
}

TEST(GangParkTest, NeverLowersTheTarget) {
  const auto d = DecideGangPark({Parked(12), Parked(14)}, 12);
  EXPECT_EQ(d.kind, GangParkDecision::kRaise);
  EXPECT_GE(d.target, 15u);
}

TEST(GangParkTest, AnExitedRankMeansTheGangCannotPark) {
  EXPECT_EQ(DecideGangPark({Parked(9), {RankView::kExited, 9}}, 9).kind, GangParkDecision::kWait);
  EXPECT_EQ(DecideGangPark({}, 0).kind, GangParkDecision::kWait);
}

// A simulation of lockstep ranks (as under DDP: a rank at count c passes its
// next boundary only once every rank has passed boundary c) of which one sees
// the suspend late, after passing `late` more boundaries: following the
// decisions always parks every rank at one count, and never deadlocks.
TEST(GangParkTest, LockstepRanksAlwaysSettleAtOneCount) {
  for (int n = 2; n <= 4; ++n) {
    for (int late = 0; late < 4; ++late) {
      std::vector<RankView> ranks(n, Running(5));
      ranks[0].count = 6;  // one rank a boundary ahead
      uint64_t target = FirstParkTarget(ranks);
      std::vector<int> unseen(n, 0);
      unseen[n - 1] = late;
      bool settled = false;
      for (int step = 0; step < 100 && !settled; ++step) {
        for (int k = 0; k < n; ++k) {
          RankView& r = ranks[k];
          if (r.state == RankView::kParked) continue;
          // Finishing iteration c+1 takes every rank in it: past boundary c,
          // not parked there. Otherwise this rank waits in the allreduce.
          bool blocked = false;
          for (int j = 0; j < n; ++j)
            if (j != k && (ranks[j].count < r.count ||
                           (ranks[j].count == r.count && ranks[j].state == RankView::kParked)))
              blocked = true;
          if (blocked) continue;
          ++r.count;  // the next boundary
          if (unseen[k] > 0) {
            --unseen[k];
          } else if (r.count >= target) {
            r.state = RankView::kParked;
          }
        }
        const auto d = DecideGangPark(ranks, target);
        settled = d.kind == GangParkDecision::kParked;
        if (d.kind == GangParkDecision::kRaise) target = d.target;
        for (RankView& r : ranks)  // woken: parked below the target, they run on
          if (r.state == RankView::kParked && r.count < target) r.state = RankView::kRunning;
      }
      ASSERT_TRUE(settled) << n << " ranks, late " << late;
      for (const RankView& r : ranks) EXPECT_EQ(r.count, ranks[0].count);
    }
  }
}

}  // namespace
}  // namespace gandiva::controller
