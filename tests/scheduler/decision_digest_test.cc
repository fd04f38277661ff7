// The decisions of every policy on a seeded synthetic trace, pinned by digest:
// a change meant only to make the simulator or a policy faster must leave
// every digest as it is. The golden values were printed by running these
// replays (the code of November 2026, before the million-job speed-ups); a
// change that alters decisions on purpose updates them and says why.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "gandiva/scheduler/sim_digest.h"
#include "gandiva/scheduler/synthetic_trace.h"
#include "sim_test_util.h"

namespace gandiva::sched {
namespace {

SyntheticTraceOptions SmallTrace(int gpus) {
  SyntheticTraceOptions o;
  o.jobs = 3000;
  o.seed = 7;
  o.cluster_gpus = gpus;
  o.offered_load = 1.1;  // a queue most of the time: preemption, packing, moves
  return o;
}

std::vector<SimJobSpec> BuildOrDie(const Trace& t, const Topology& topo, const PerfModel& perf) {
  auto jobs = BuildJobs(t, topo, perf, 1);
  EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
  return jobs.ok() ? std::move(jobs).value() : std::vector<SimJobSpec>{};
}

// Replays under every policy; checks each against `golden` and that a second
// run gives the same digest. Returns gandiva's result.
SimResult CheckDigests(const Topology& topo, const PerfModel& perf,
                       const std::vector<SimJobSpec>& jobs,
                       const std::map<std::string, std::string>& golden) {
  SimConfig config;  // default costs
  SimResult gandiva;
  for (const auto& name : PolicyNames()) {
    SimResult r = testing::Replay(topo, perf, jobs, name, config);
    EXPECT_EQ(r.jobs.size(), jobs.size()) << name;
    std::string digest = DigestHex(DecisionDigest(r));
    auto want = golden.find(name);
    EXPECT_EQ(digest, want != golden.end() ? want->second : "(none)")
        << name << " decided differently";
    EXPECT_EQ(DigestHex(DecisionDigest(testing::Replay(topo, perf, jobs, name, config))), digest)
        << name << " is not deterministic";
    if (name == "gandiva") gandiva = std::move(r);
  }
  return gandiva;
}

TEST(SyntheticTraceTest, SeededSortedAndOffersTheLoadAskedFor) {
  SyntheticTraceOptions o = SmallTrace(192);
  Trace a = SyntheticTrace(o), b = SyntheticTrace(o);
  ASSERT_EQ(a.jobs.size(), 3000u);
  double gpu_seconds = 0;
  int single = 0;
  for (size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].submit_time, b.jobs[i].submit_time);
    EXPECT_EQ(a.jobs[i].duration, b.jobs[i].duration);
    EXPECT_EQ(a.jobs[i].num_gpus, b.jobs[i].num_gpus);
    if (i > 0) {
      EXPECT_GE(a.jobs[i].submit_time, a.jobs[i - 1].submit_time);
    }
    EXPECT_GE(a.jobs[i].duration, 30);
    EXPECT_LE(a.jobs[i].duration, 432000);
    gpu_seconds += a.jobs[i].duration * a.jobs[i].num_gpus;
    single += a.jobs[i].num_gpus == 1;
  }
  EXPECT_EQ(a.jobs[0].submit_time, 0);
  double span = a.jobs.back().submit_time;
  EXPECT_NEAR(gpu_seconds / (span * 192), 1.1, 0.1);
  EXPECT_NEAR(single / 3000.0, 0.70, 0.03);
  o.seed = 8;
  Trace c = SyntheticTrace(o);
  EXPECT_NE(c.jobs[1].submit_time, a.jobs[1].submit_time);
}

// The tiny table (types A and B) needs no shared data, so this always runs.
TEST(DecisionDigestTest, EveryPolicyDecidesAsBeforeWithTheTinyTable) {
  auto perf = PerfModel::Load(testing::WriteTinyTable());
  ASSERT_TRUE(perf.ok()) << perf.status().ToString();
  Topology topo = Topology::Uniform(24, 8);
  auto jobs = BuildOrDie(SyntheticTrace(SmallTrace(192)), topo, *perf);
  const std::map<std::string, std::string> golden = {
      {"fifo", "81eb3c3a10883a08"},         {"srtf", "8a50753385da4638"},
      {"las", "b1e6447708994ac5"},          {"gandiva", "a4ea75030b205727"},
      {"reserve-pack", "51cfe5a5d708d7a7"}, {"sjf-predicted", "60adb6fd7ecd4982"},
      {"sjf-tree", "49618fa1cf5440e9"},     {"philly", "dbd16d034e5280fa"},
  };
  SimResult g = CheckDigests(topo, *perf, jobs, golden);
  // The replay reaches the decisions the digest is meant to pin.
  EXPECT_GT(g.preemptions, 0);
  EXPECT_GT(g.migrations, 0);
  EXPECT_GT(g.policy.packs, 0);
  // And the digest sees a finish one ulp later.
  uint64_t before = DecisionDigest(g);
  g.jobs[g.jobs.size() / 2].finish = std::nextafter(g.jobs[g.jobs.size() / 2].finish, 1e300);
  EXPECT_NE(DecisionDigest(g), before);
}

// With the measured co-location table: every kind of job, measured pairs.
TEST(DecisionDigestTest, EveryPolicyDecidesAsBeforeWithTheMeasuredTable) {
  if (!testing::HaveData("colocation/gavel_simulation_throughputs.json"))
    GTEST_SKIP() << "no shared data";
  auto perf = PerfModel::Load(testing::DataDir() + "/colocation/gavel_simulation_throughputs.json");
  ASSERT_TRUE(perf.ok()) << perf.status().ToString();
  Topology topo = Topology::Uniform(24, 8);
  auto jobs = BuildOrDie(SyntheticTrace(SmallTrace(192)), topo, *perf);
  const std::map<std::string, std::string> golden = {
      {"fifo", "81eb3c3a10883a08"},         {"srtf", "fbb0da16ddf8fc16"},
      {"las", "42dbdfeef6f2afbc"},          {"gandiva", "4b2da169b8c9687e"},
      {"reserve-pack", "7687f30f8caba282"}, {"sjf-predicted", "365e98ea36dfb546"},
      {"sjf-tree", "a3c385efe6e461cb"},     {"philly", "dbd16d034e5280fa"},
  };
  SimResult g = CheckDigests(topo, *perf, jobs, golden);
  EXPECT_GT(g.preemptions, 0);
  EXPECT_GT(g.migrations, 0);
  EXPECT_GT(g.policy.packs, 0);
  EXPECT_GT(g.resizes, 0);
}

}  // namespace
}  // namespace gandiva::sched
