// Gang placement: best fit, whole machines for big gangs, spread as a last resort.
#include "gandiva/scheduler/placement.h"

#include <gtest/gtest.h>

#include "sim_test_util.h"

namespace gandiva::sched {
namespace {

using testing::J;
using testing::Jobs;

TEST(PlacementTest, BestFitPicksTheFullestMachineThatHoldsTheGang) {
  Topology topo = Topology::Uniform(3, 4);
  FreeIndex free(topo);
  std::vector<GpuId> busy = {0, 1, 2, 4};  // m0 has 1 free, m1 has 3, m2 has 4
  free.Take(busy);
  auto p = FindConsolidated(free, 2, kAllGpuTypes);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (std::vector<GpuId>{5, 6}));
  // Five GPUs need two machines at least; m2 + m1 hold them.
  auto five = FindConsolidated(free, 5, kAllGpuTypes);
  ASSERT_TRUE(five);
  EXPECT_EQ(five->size(), 5u);
  EXPECT_FALSE(FindConsolidated(free, 9, kAllGpuTypes));
}

TEST(PlacementTest, BigGangTakesWholeMachinesOrNothing) {
  Topology topo = Topology::Uniform(3, 4);
  FreeIndex free(topo);
  auto p = FindConsolidated(free, 8, kAllGpuTypes);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->size(), 8u);
  std::vector<GpuId> two = {0, 4};
  free.Take(two);
  // 10 free (3+3+4), but no two machines hold 8: an 8-GPU gang would need three.
  EXPECT_FALSE(FindConsolidated(free, 8, kAllGpuTypes));
  auto s = FindSpread(free, 8, kAllGpuTypes);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->size(), 8u);
}

// The gang never splits when a consolidated placement exists (relaxation off):
// a split job would run at the spread factor and take longer than its duration.
TEST(PlacementTest, GangNeverSplitsWhenAPackedPlacementExists) {
  Topology topo = Topology::Uniform(2, 4);
  PerfModel perf = PerfModel::Neutral();
  auto jobs = Jobs({{0, 100, 1}, {1, 100, 4}, {2, 100, 2}});
  PolicyOptions no_grow;  // a grow trial would restart the job (a stall)
  no_grow.gandiva_grow = false;
  for (const char* policy :
       {"fifo", "srtf", "las", "sjf-predicted", "sjf-tree", "gandiva", "reserve-pack"}) {
    SimResult r = testing::Replay(topo, perf, jobs, policy, testing::ExactConfig(), no_grow);
    ASSERT_EQ(r.jobs.size(), 3u);
    for (const auto& j : r.jobs) EXPECT_DOUBLE_EQ(j.finish - j.first_start, 100) << policy;
  }
}

TEST(PlacementTest, StrictLocalityWaitsAndBestEffortSpreads) {
  Topology topo = Topology::Uniform(2, 4);
  PerfModel perf = PerfModel::Neutral();
  // Two 3-GPU jobs leave 1+1 free; a 2-GPU job arrives.
  auto jobs = Jobs({{0, 100, 3}, {0, 100, 3}, {1, 60, 2}});
  SimResult best = testing::Replay(topo, perf, jobs, "fifo");
  EXPECT_DOUBLE_EQ(best.jobs[2].first_start, 1);
  EXPECT_DOUBLE_EQ(best.jobs[2].finish, 1 + 60 / 0.75);  // spread over two machines
  PolicyOptions strict;
  strict.locality = Locality::kStrict;
  SimResult s = testing::Replay(topo, perf, jobs, "fifo", testing::ExactConfig(), strict);
  EXPECT_DOUBLE_EQ(s.jobs[2].first_start, 100);
  EXPECT_DOUBLE_EQ(s.jobs[2].finish, 160);
  PolicyOptions relaxed;
  relaxed.locality = Locality::kRelaxed;
  relaxed.locality_delay = 30;
  SimResult r = testing::Replay(topo, perf, jobs, "fifo", testing::ExactConfig(), relaxed);
  EXPECT_DOUBLE_EQ(r.jobs[2].first_start, 31);  // Philly: spread after the delay
}

}  // namespace
}  // namespace gandiva::sched
