// Properties of every policy on random traces: no GPU over-allocated (checked
// at every instant), every job finishes, work is conserved, runs are deterministic.
#include <gtest/gtest.h>

#include <random>

#include "gandiva/scheduler/report.h"
#include "sim_test_util.h"

namespace gandiva::sched {
namespace {

std::vector<SimJobSpec> RandomJobs(uint32_t seed, int n, const PerfModel& perf) {
  std::mt19937 rng(seed);
  std::vector<testing::J> js;
  double t = 0;
  const int sizes[] = {1, 1, 1, 1, 2, 2, 4, 8, 16};
  for (int i = 0; i < n; ++i) {
    t += std::exponential_distribution<double>(1.0 / 30)(rng);
    int gpus = sizes[rng() % 9];
    double dur = std::exp(std::uniform_real_distribution<double>(1, 9)(rng));
    js.push_back({t, dur, gpus, perf.AssignType(seed, i, gpus)});
  }
  return testing::Jobs(js);
}

class SimPropertyTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (testing::HaveData("colocation/gavel_simulation_throughputs.json")) {
      auto p =
          PerfModel::Load(testing::DataDir() + "/colocation/gavel_simulation_throughputs.json");
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      perf_ = std::move(p).value();
    }
  }
  PerfModel perf_ = PerfModel::Neutral();
};

TEST_P(SimPropertyTest, EveryJobFinishesNoOverAllocationWorkConserved) {
  Topology topo = Topology::Uniform(4, 8);
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto jobs = RandomJobs(seed, 400, perf_);
    SimConfig config;  // default costs; invariants checked at every instant
    config.check_invariants = true;
    SimResult r = testing::Replay(topo, perf_, jobs, GetParam(), config);
    ASSERT_EQ(r.jobs.size(), jobs.size());
    double work = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobRecord& j = r.jobs[i];
      ASSERT_GE(j.finish, j.first_start) << "job " << i << " never finished";
      ASSERT_GE(j.first_start, j.submit);
      work += jobs[i].duration * jobs[i].info.num_gpus;
    }
    // Effective GPU-seconds integrate rate x GPUs over time: exactly the work.
    EXPECT_NEAR(r.effective_gpu_seconds, work, 1e-6 * work) << GetParam() << " seed " << seed;
    EXPECT_LE(r.effective_gpu_seconds,
              r.allocated_gpu_seconds * 2 + 1e-6);  // at most two jobs per GPU
  }
}

TEST_P(SimPropertyTest, SameSeedSameNumbers) {
  Topology topo = Topology::Uniform(4, 8);
  auto jobs = RandomJobs(7, 300, perf_);
  SimConfig config;
  std::string a = ReportsToJson(
      {MakeReport(GetParam(), testing::Replay(topo, perf_, jobs, GetParam(), config))}, "t", "c");
  std::string b = ReportsToJson(
      {MakeReport(GetParam(), testing::Replay(topo, perf_, jobs, GetParam(), config))}, "t", "c");
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, SimPropertyTest, ::testing::ValuesIn(PolicyNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace gandiva::sched

namespace gandiva::sched {
namespace {

// An idle gap spanning many buckets must read as idle, not as a spike.
TEST(UtilisationTest, SeriesIsBoundedAndIntegratesToTheWork) {
  Topology topo = Topology::Uniform(1, 1);
  PerfModel perf = PerfModel::Neutral();
  SimConfig config = testing::ExactConfig();
  config.max_util_points = 50;
  SimResult r = testing::Replay(topo, perf, testing::Jobs({{0, 100}, {10000, 100}, {10001, 100}}),
                                "fifo", config);
  ASSERT_FALSE(r.util.empty());
  EXPECT_LE(static_cast<int>(r.util.size()), 50);
  double gpu_seconds = 0;
  for (const auto& u : r.util) {
    EXPECT_LE(u.allocated, 1 + 1e-9);
    EXPECT_GE(u.allocated, 0);
    gpu_seconds += u.allocated * std::min(r.util_bucket_seconds, 10200 - u.time);
  }
  EXPECT_NEAR(gpu_seconds, 300, 1e-6);
}

}  // namespace
}  // namespace gandiva::sched
