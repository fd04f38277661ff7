// Replays of the real traces in ../shared/data: the Tiresias 60-job workload, a
// slice of the Philly trace, and the fragmentation experiment on the Alibaba
// 2023 trace. Skipped when the data is not there.
#include <gtest/gtest.h>

#include <map>

#include "gandiva/scheduler/fractional_experiment.h"
#include "gandiva/scheduler/sim_runner.h"
#include "sim_test_util.h"

namespace gandiva::sched {
namespace {

SimSetup MakeSetup(const std::string& trace, const std::string& cluster) {
  SimSetup s;
  s.trace_path = testing::DataDir() + "/" + trace;
  s.cluster = cluster;
  s.machines_path = testing::DataDir() + "/philly/cluster_machine_list.csv";
  s.colocation_path = testing::DataDir() + "/colocation/gavel_simulation_throughputs.json";
  return s;
}

// The figures docs/simulator.md reports, for one seed: every trace row reads,
// and FGD leaves fewer GPUs unallocated and fewer fragmented than best-fit and
// first-fit.
TEST(ReplayTest, AlibabaFragmentationFgdLeavesTheFewestGpusUnallocated) {
  if (!testing::HaveData("alibaba/openb_pod_list_default.csv")) GTEST_SKIP() << "no shared data";
  FractionalOptions o;
  o.tasks_path = testing::DataDir() + "/alibaba/openb_pod_list_default.csv";
  o.nodes_path = testing::DataDir() + "/alibaba/openb_node_list_gpu_node.csv";
  o.seeds = {1};
  auto r = RunFractionalExperiment(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->trace_tasks, 8152);
  EXPECT_EQ(r->nodes, 1213);
  EXPECT_EQ(r->capacity_gpus, 6212);
  ASSERT_EQ(r->runs.size(), 3u);
  const FractionalRun &first_fit = r->runs[0], &best_fit = r->runs[1], &fgd = r->runs[2];
  ASSERT_EQ(fgd.policy, "fgd");
  EXPECT_EQ(fgd.tasks, 8152);
  EXPECT_LT(fgd.unallocated_gpus, first_fit.unallocated_gpus);
  EXPECT_LT(fgd.unallocated_gpus, best_fit.unallocated_gpus);
  EXPECT_LT(fgd.fragmented_gpus_at_first_failure, first_fit.fragmented_gpus_at_first_failure);
  EXPECT_LT(fgd.unplaced_demand, best_fit.unplaced_demand);
}

TEST(ReplayTest, Tiresias60JobsUnderEveryPolicy) {
  if (!testing::HaveData("philly/tiresias_60_jobs.csv")) GTEST_SKIP() << "no shared data";
  SimSetup s = MakeSetup("philly/tiresias_60_jobs.csv", "uniform:4x4");
  s.sim.check_invariants = true;
  auto loaded = LoadSim(s);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->jobs.size(), 60u);
  double fifo_jct = 0;
  for (const auto& name : PolicyNames()) {
    auto r = RunPolicy(*loaded, name, s.sim, s.policy);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(r->jobs, 60);
    EXPECT_GT(r->avg_jct, 0);
    if (name == "fifo") fifo_jct = r->avg_jct;
    if (name == "las") {
      EXPECT_LT(r->avg_jct, fifo_jct);
    }
  }
}

TEST(ReplayTest, PhillySliceSmoke) {
  if (!testing::HaveData("philly/philly_jobs.csv")) GTEST_SKIP() << "no shared data";
  SimSetup s = MakeSetup("philly/philly_jobs.csv", "philly");
  s.trace.max_jobs = 4000;
  s.trace.load = 8;  // a busy slice, so that policies differ
  auto loaded = LoadSim(s);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->topology.num_gpus(), 2490);
  EXPECT_EQ(loaded->topology.machines().size(), 552u);
  std::map<std::string, Report> runs;
  for (const auto& name : PolicyNames()) {
    auto r = RunPolicy(*loaded, name, s.sim, s.policy);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(r->jobs, 4000);
    runs.emplace(name, std::move(r).value());
  }
  EXPECT_LE(runs["srtf"].avg_jct, runs["fifo"].avg_jct);
}

TEST(ReplayTest, HeterogeneousPaiCluster) {
  if (!testing::HaveData("alibaba/pai_machine_spec.csv")) GTEST_SKIP() << "no shared data";
  auto topo = LoadPaiMachines(testing::DataDir() + "/alibaba/pai_machine_spec.csv");
  ASSERT_TRUE(topo.ok()) << topo.status().ToString();
  EXPECT_EQ(topo->machines().size(), 1814u);  // the 83 CPU-only machines are dropped
  int high = 0;
  for (const auto& t : topo->gpu_types()) high += t.high_end;
  EXPECT_EQ(high, 2);  // V100 and V100M32
}

TEST(ReplayTest, MissingTraceIsNotFound) {
  SimSetup s;
  s.trace_path = "/nonexistent/trace.csv";
  s.cluster = "uniform:1x1";
  auto loaded = LoadSim(s);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gandiva::sched
