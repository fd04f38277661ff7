// The fragmentation experiment end to end on a two-GPU cluster worked out by hand.
#include "gandiva/scheduler/fractional_experiment.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace gandiva::sched {
namespace {

class FractionalExperimentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/gandiva_frag_test." + std::to_string(getpid());
    std::string mk = "mkdir -p " + dir_;
    ASSERT_EQ(std::system(mk.c_str()), 0);
    // One node of two GPUs; 600, 600 and a whole GPU arrive in that order.
    Write("nodes.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\n");
    Write("pods.csv",
          "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
          "deletion_time,scheduled_time\n"
          "c,1000,1024,1,1000,,LS,Running,30,40,30\n"
          "a,1000,1024,1,600,,LS,Running,10,40,10\n"
          "b,1000,1024,1,600,,LS,Running,20,40,20\n");
    options_.tasks_path = dir_ + "/pods.csv";
    options_.nodes_path = dir_ + "/nodes.csv";
  }
  void TearDown() override {
    std::string rm = "rm -rf " + dir_;
    std::system(rm.c_str());
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ + "/" + name) << text;
  }
  std::string dir_;
  FractionalOptions options_;
};

TEST_F(FractionalExperimentTest, TraceOrderStrandsTwoRemaindersOfFourHundred) {
  options_.order = "trace";
  auto report = RunFractionalExperiment(options_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->capacity_gpus, 2);
  EXPECT_DOUBLE_EQ(report->trace_demand_gpus, 2.2);
  ASSERT_EQ(report->runs.size(), 3u);
  for (const FractionalRun& run : report->runs) {
    SCOPED_TRACE(run.policy);
    // Whatever the policy, the two 600s take one GPU each and the whole GPU
    // (the last by creation time) finds none.
    EXPECT_EQ(run.seed, -1);
    EXPECT_EQ(run.placed, 2);
    EXPECT_EQ(run.failed, 1);
    EXPECT_EQ(run.first_failure, 2);
    EXPECT_DOUBLE_EQ(run.arrived_at_first_failure, 0.6);
    EXPECT_DOUBLE_EQ(run.allocated_at_first_failure, 0.6);
    EXPECT_DOUBLE_EQ(run.fragmented_gpus_at_first_failure, 0.8);
    EXPECT_EQ(run.first_failed_num_gpu, 1);
    EXPECT_EQ(run.first_failed_gpu_milli, 1000);
    EXPECT_DOUBLE_EQ(run.unplaced_demand, 1.0 / 2.2);
    EXPECT_DOUBLE_EQ(run.allocated_at_end, 0.6);
    EXPECT_DOUBLE_EQ(run.unallocated_gpus, 0.8);
    // No task of the mix (600s and whole GPUs) can use a 400 remainder.
    EXPECT_DOUBLE_EQ(run.fragmented_gpus, 0.8);
  }
  EXPECT_NE(FormatFractionalTable(*report).find("fgd"), std::string::npos);
  EXPECT_NE(FractionalReportToJson(*report).find("\"fragmented_gpus\""), std::string::npos);
}

TEST_F(FractionalExperimentTest, InflatedShufflesReachTheDemandAndRepeatPerSeed) {
  options_.seeds = {7, 7, 8};
  options_.inflate = 2;
  options_.policies = {"fgd"};
  auto report = RunFractionalExperiment(options_);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->runs.size(), 3u);
  EXPECT_EQ(report->runs[0].tasks, 6);  // two whole passes
  EXPECT_EQ(report->runs[0].placed, report->runs[1].placed);
  EXPECT_EQ(report->runs[0].first_failure, report->runs[1].first_failure);
}

TEST_F(FractionalExperimentTest, BadOptionsAndFilesAreErrors) {
  options_.policies = {"worst-fit"};
  EXPECT_EQ(RunFractionalExperiment(options_).status().code(), StatusCode::kInvalidArgument);
  options_.policies = {"fgd"};
  options_.order = "trace";
  options_.inflate = 1.5;
  EXPECT_EQ(RunFractionalExperiment(options_).status().code(), StatusCode::kInvalidArgument);
  options_.inflate = 1;
  Write("pods.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time\nx,1,1,1,0,0\n");
  auto bad = RunFractionalExperiment(options_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("pods.csv:2: num_gpu 1 with gpu_milli 0"),
            std::string::npos);
}

}  // namespace
}  // namespace gandiva::sched
