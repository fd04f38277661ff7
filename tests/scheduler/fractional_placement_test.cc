// The fractional-GPU model, FGD's fragmentation measure and the three placement
// policies, on clusters small enough to work out by hand.
#include "cluster/fractional_placement.h"

#include <gtest/gtest.h>

#include "cluster/fractional_cluster.h"
#include "cluster/fragmentation.h"

namespace gandiva::sched {
namespace {

TaskShape Share(int milli, long cpu = 0, long memory = 0) { return {1, milli, cpu, memory}; }
TaskShape Whole(int gpus, long cpu = 0, long memory = 0) { return {gpus, kGpuMilli, cpu, memory}; }
TaskShape CpuOnly(long cpu) { return {0, 0, cpu, 0}; }

FractionalNode NodeWith(std::vector<int> gpu_free, long cpu_free = 1000, long memory_free = 1000) {
  FractionalNode n;
  n.cpu_free = n.cpu_capacity = cpu_free;
  n.memory_free = n.memory_capacity = memory_free;
  n.gpu_free = std::move(gpu_free);
  return n;
}

// A cluster of GPU-only nodes (CPU and memory never short), with some GPU
// capacity already taken: taken[n][g] milli of GPU g of node n.
FractionalCluster ClusterWith(const std::vector<std::vector<int>>& taken) {
  FractionalCluster c;
  for (const auto& gpus : taken) {
    const int n = c.AddNode(1000000, 1000000, static_cast<int>(gpus.size()));
    for (int g = 0; g < static_cast<int>(gpus.size()); ++g)
      if (gpus[g] > 0) c.Place({n, {g}}, Share(gpus[g]));
  }
  return c;
}

TEST(FractionalClusterTest, SharesFitWhereEnoughIsLeftAndWholeGpusOnlyOnUntouchedOnes) {
  FractionalCluster c = ClusterWith({{0, 500}});
  EXPECT_EQ(c.gpu_capacity(), 2000);
  EXPECT_EQ(c.gpu_allocated(), 500);
  EXPECT_TRUE(c.Fits(0, Share(500)));
  EXPECT_TRUE(c.Fits(0, Whole(1)));
  EXPECT_FALSE(c.Fits(0, Whole(2)));  // GPU 1 is half taken
  // A share has one choice per distinct amount left: GPU 0 (1000) and GPU 1 (500).
  EXPECT_EQ(c.Choices(0, Share(400)), (std::vector<std::vector<int>>{{0}, {1}}));
  EXPECT_EQ(c.Choices(0, Share(600)), (std::vector<std::vector<int>>{{0}}));
  c.Place({0, {0}}, Whole(1));
  EXPECT_EQ(c.gpu_allocated(), 1500);
  EXPECT_FALSE(c.Fits(0, Whole(1)));
  EXPECT_TRUE(c.Choices(0, Whole(1)).empty());
}

TEST(FractionalClusterTest, CpuAndMemoryAreNeededToo) {
  FractionalCluster c;
  c.AddNode(4000, 8192, 2);
  EXPECT_TRUE(c.Fits(0, Whole(2, 4000, 8192)));
  EXPECT_FALSE(c.Fits(0, Whole(1, 4001, 0)));
  EXPECT_FALSE(c.Fits(0, Share(100, 0, 8193)));
  EXPECT_TRUE(c.Fits(0, CpuOnly(4000)));
  c.Place({0, {}}, CpuOnly(3000));
  EXPECT_FALSE(c.Fits(0, Share(100, 2000, 0)));
  EXPECT_EQ(c.gpu_allocated(), 0);
}

TEST(FragmentationTest, FreeCapacityATaskCannotUseIsFragmented) {
  const FractionalNode n = NodeWith({1000, 300});
  EXPECT_EQ(FragmentedFor(n, Share(500)), 300);         // GPU 1 has too little left for it
  EXPECT_EQ(FragmentedFor(n, Share(300)), 0);           // both GPUs can take it
  EXPECT_EQ(FragmentedFor(n, Whole(1)), 300);           // a partly taken GPU is no use to it
  EXPECT_EQ(FragmentedFor(n, Whole(2)), 1300);          // does not fit: everything free
  EXPECT_EQ(FragmentedFor(n, CpuOnly(1)), 1300);        // uses no GPU
  EXPECT_EQ(FragmentedFor(n, Share(100, 2000)), 1300);  // CPU short
}

TEST(FragmentationTest, AMixWeighsTheTasksOfItsDistribution) {
  TaskMix mix;
  mix.Add(Share(500));
  mix.Add(Whole(1), 3);
  mix.Add(CpuOnly(10));  // left out: it would count every free milli for every node alike
  // [1000, 300]: 300 for either kind.
  EXPECT_DOUBLE_EQ(mix.NodeFragmentation(NodeWith({1000, 300})), 300);
  // [1000, 600]: 0 for the share, 600 for whole GPUs: (0 + 3 x 600) / 4.
  EXPECT_DOUBLE_EQ(mix.NodeFragmentation(NodeWith({1000, 600})), 450);
  // Shapes that do not fit in CPU count everything free.
  TaskMix cpu_heavy;
  cpu_heavy.Add(Share(100, 5000));
  cpu_heavy.Add(Share(100, 10));
  EXPECT_DOUBLE_EQ(cpu_heavy.NodeFragmentation(NodeWith({1000, 300}, 1000)), 650);
}

FractionalPlacement Choose(FractionalPolicy p, const FractionalCluster& c, const TaskShape& t,
                           const TaskMix& mix = {}) {
  auto placer = MakeFractionalPlacer(p, mix);
  auto where = placer->Choose(c, t);
  EXPECT_TRUE(where.has_value());
  return where.value_or(FractionalPlacement{});
}

TEST(FractionalPlacementTest, FirstFitTakesTheFirstNodeAndGpuThatHoldIt) {
  FractionalCluster c = ClusterWith({{900, 900}, {0, 0}, {200, 0}});
  FractionalPlacement p = Choose(FractionalPolicy::kFirstFit, c, Share(300));
  EXPECT_EQ(p.node, 1);
  EXPECT_EQ(p.gpus, std::vector<int>{0});
  p = Choose(FractionalPolicy::kFirstFit, c, Share(800));
  EXPECT_EQ(p.node, 1);
  p = Choose(FractionalPolicy::kFirstFit, c, Whole(1));
  EXPECT_EQ(p.node, 1);
  EXPECT_EQ(p.gpus, std::vector<int>{0});
}

TEST(FractionalPlacementTest, BestFitTakesTheTightestNodeAndGpu) {
  // Node 0 has 100 left per GPU (no room); node 2 (one GPU, 400 left) is left
  // fuller than node 1 (two GPUs untouched).
  FractionalCluster c = ClusterWith({{900, 900}, {0, 0}, {600}});
  FractionalPlacement p = Choose(FractionalPolicy::kBestFit, c, Share(300));
  EXPECT_EQ(p.node, 2);
  // Within a node, the GPU with the least left that holds it: 1000, 500, 300
  // and 200 are left; the 250 goes on the GPU with 300.
  FractionalCluster one = ClusterWith({{0, 500, 700, 800}});
  p = Choose(FractionalPolicy::kBestFit, one, Share(250));
  EXPECT_EQ(p.gpus, std::vector<int>{2});
}

TEST(FractionalPlacementTest, NoPlacementWhenNothingHoldsTheTask) {
  FractionalCluster c = ClusterWith({{500, 0}, {0, 600}});
  for (auto policy :
       {FractionalPolicy::kFirstFit, FractionalPolicy::kBestFit, FractionalPolicy::kFgd}) {
    TaskMix mix;
    mix.Add(Whole(2));
    EXPECT_FALSE(MakeFractionalPlacer(policy, mix)->Choose(c, Whole(2)).has_value());
  }
}

// The case FGD is for: best-fit splits the last untouched GPU of a nearly full
// 8-GPU node, because that node is left tightest; FGD puts the share on the
// GPU that has 400 left, which no whole-GPU task could use anyway, and keeps
// the whole GPU for one.
TEST(FractionalPlacementTest, FgdKeepsAWholeGpuThatBestFitWouldSplit) {
  FractionalCluster c = ClusterWith({{0, 1000, 1000, 1000, 1000, 1000, 1000, 1000}, {600}});
  TaskMix mix;
  mix.Add(Share(300));
  mix.Add(Whole(1));
  EXPECT_EQ(Choose(FractionalPolicy::kBestFit, c, Share(300)).node, 0);
  FractionalPlacement p = Choose(FractionalPolicy::kFgd, c, Share(300), mix);
  EXPECT_EQ(p.node, 1);
  // Node 0 would go from 0 to (0 + 700) / 2 = 350; node 1 from (0 + 400) / 2
  // = 200 to (100 + 100) / 2 = 100: a descent of 100.
  EXPECT_DOUBLE_EQ(mix.NodeFragmentation(AfterPlacing(c.nodes()[1], {0}, Share(300))) -
                       mix.NodeFragmentation(c.nodes()[1]),
                   -100);
}

// Within a node too: of two GPUs with room, FGD takes the one whose remainder
// the mix can still use.
TEST(FractionalPlacementTest, FgdLeavesARemainderTheMixCanUse) {
  // GPU 0 has 600 left, GPU 1 has 500, and the mix is all 400s. A 200 on
  // GPU 0 leaves 400 and 500, both usable; on GPU 1 it strands 300.
  FractionalCluster c = ClusterWith({{400, 500}});
  TaskMix mix;
  mix.Add(Share(400));
  FractionalPlacement p = Choose(FractionalPolicy::kFgd, c, Share(200), mix);
  EXPECT_EQ(p.gpus, std::vector<int>{0});  // GPU 0: 400 left, still usable
  // Best-fit takes the tighter GPU 1 and strands its 300.
  EXPECT_EQ(Choose(FractionalPolicy::kBestFit, c, Share(200)).gpus, std::vector<int>{1});
}

TEST(FractionalPlacementTest, FgdFollowsAMixThatChanges) {
  FractionalCluster c = ClusterWith({{400, 500}});
  TaskMix mix;
  mix.Add(Share(300));
  auto placer = MakeFractionalPlacer(FractionalPolicy::kFgd, mix);
  // Both remainders (400 or 300 left after 200) hold a 300: a tie, best-fit's GPU 1.
  EXPECT_EQ(placer->Choose(c, Share(200))->gpus, std::vector<int>{1});
  mix.Add(Share(400), 10);  // now mostly 400s: keep GPU 0's 400
  EXPECT_EQ(placer->Choose(c, Share(200))->gpus, std::vector<int>{0});
}

TEST(FractionalPlacementTest, PolicyNamesRoundTrip) {
  for (const char* name : {"first-fit", "best-fit", "fgd"})
    EXPECT_STREQ(FractionalPolicyName(ParseFractionalPolicy(name).value()), name);
  EXPECT_FALSE(ParseFractionalPolicy("worst-fit").ok());
}

}  // namespace
}  // namespace gandiva::sched
