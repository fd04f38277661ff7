// Policies on hand-made traces whose optimal answer is known.
#include <gtest/gtest.h>

#include "gandiva/scheduler/duration_predictor.h"
#include "gandiva/scheduler/perf_model.h"
#include "sim_test_util.h"

namespace gandiva::sched {
namespace {

using testing::J;
using testing::Jobs;
using testing::Replay;

TEST(FifoTest, HeadOfLineBlocks) {
  Topology topo = Topology::Uniform(1, 4);
  PerfModel perf = PerfModel::Neutral();
  // The 4-GPU job waits for the first to finish; the 1-GPU job behind it waits too.
  SimResult r = Replay(topo, perf, Jobs({{0, 100, 2}, {1, 50, 4}, {2, 10, 1}}), "fifo");
  EXPECT_DOUBLE_EQ(r.jobs[1].first_start, 100);
  EXPECT_DOUBLE_EQ(r.jobs[2].first_start, 150);
}

TEST(SrtfTest, ShortestRemainingRunsFirstOnThreeJobs) {
  Topology topo = Topology::Uniform(1, 1);
  PerfModel perf = PerfModel::Neutral();
  SimResult r = Replay(topo, perf, Jobs({{0, 300}, {10, 100}, {20, 50}}), "srtf");
  // c runs 20..70, then b (90 left) 70..160, then a (290 left) 160..450.
  EXPECT_DOUBLE_EQ(r.jobs[2].finish, 70);
  EXPECT_DOUBLE_EQ(r.jobs[1].finish, 160);
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 450);
  EXPECT_EQ(r.jobs[0].preemptions, 1);
  EXPECT_EQ(r.jobs[1].preemptions, 1);
  EXPECT_EQ(r.preemptions, 2);
}

TEST(SrtfTest, PreemptionCostDelaysTheResumedJob) {
  Topology topo = Topology::Uniform(1, 1);
  PerfModel perf = PerfModel::Neutral();
  SimConfig c = testing::ExactConfig();
  c.preempt_seconds = 10;
  SimResult r = Replay(topo, perf, Jobs({{0, 300}, {10, 100}}), "srtf", c);
  EXPECT_DOUBLE_EQ(r.jobs[1].finish, 110);
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 110 + 10 + 290);
}

TEST(LasTest, DemotionAtTheThresholdLetsTheNewcomerRun) {
  Topology topo = Topology::Uniform(1, 1);
  PerfModel perf = PerfModel::Neutral();
  PolicyOptions o;
  o.las_thresholds = {100};
  SimResult r = Replay(topo, perf, Jobs({{0, 1000}, {50, 1000}}), "las", testing::ExactConfig(), o);
  // a crosses 100 GPU-s at t=100 and is demoted; b (queue 0) preempts it.
  EXPECT_DOUBLE_EQ(r.jobs[1].first_start, 100);
  // b is demoted at t=200; both in queue 1, a came first and runs to the end.
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 1100);
  EXPECT_DOUBLE_EQ(r.jobs[1].finish, 2000);
  EXPECT_EQ(r.jobs[0].preemptions, 1);
}

TEST(LasTest, AttainedServiceCountsGpus) {
  Topology topo = Topology::Uniform(1, 4);
  PerfModel perf = PerfModel::Neutral();
  PolicyOptions o;
  o.las_thresholds = {400};
  // A 4-GPU job reaches 400 GPU-s after 100 s, not 400 s.
  SimResult r =
      Replay(topo, perf, Jobs({{0, 1000, 4}, {10, 500, 4}}), "las", testing::ExactConfig(), o);
  EXPECT_DOUBLE_EQ(r.jobs[1].first_start, 100);
}

class GandivaPackingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = PerfModel::Load(testing::WriteTinyTable());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    perf_ = std::move(p).value();
    a_ = perf_.FindType("A");
    b_ = perf_.FindType("B");
    ASSERT_GE(a_, 0);
    ASSERT_GE(b_, 0);
  }
  // A park costs 1 s, a stop 10 s; LAS levels split at 100 GPU-s.
  static SimConfig ParkAndStopCosts() {
    SimConfig c = testing::ExactConfig();
    c.park_seconds = 1;
    c.preempt_seconds = 10;
    return c;
  }
  static PolicyOptions OneLevelAt100() {
    PolicyOptions o;
    o.las_thresholds = {100};
    return o;
  }
  PerfModel perf_ = PerfModel::Neutral();
  int a_ = -1, b_ = -1;
  Topology topo_ = Topology::Uniform(1, 1);
};

TEST_F(GandivaPackingTest, PackingKeptWhenThePairGoesFaster) {
  PolicyStats stats;
  SimResult r = Replay(topo_, perf_, Jobs({{0, 1000, 1, a_}, {0, 1000, 1, a_}}), "gandiva",
                       testing::ExactConfig(), {}, &stats);
  EXPECT_EQ(stats.packs, 1);
  EXPECT_EQ(stats.unpacks, 0);
  ASSERT_EQ(stats.pack_trials.size(), 1u);  // what it measured, as the live scheduler logs it
  EXPECT_TRUE(stats.pack_trials[0].kept);
  EXPECT_DOUBLE_EQ(stats.pack_trials[0].guest_rate, 0.8);
  EXPECT_DOUBLE_EQ(stats.pack_trials[0].resident_rate, 0.8);
  EXPECT_EQ(stats.pack_trials[0].guest_type, a_);
  // Packed at 0.8 each from t=0: both finish at 1250 (slicing would take 2000).
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 1250);
  EXPECT_DOUBLE_EQ(r.jobs[1].finish, 1250);
}

TEST_F(GandivaPackingTest, PackingRejectedWhenThePairSlowsDown) {
  PolicyStats stats;
  SimResult r = Replay(topo_, perf_, Jobs({{0, 1000, 1, a_}, {0, 1000, 1, b_}}), "gandiva",
                       testing::ExactConfig(), {}, &stats);
  // One trial (measured 0.3 + 0.3 < 1 alone), undone after one interval by
  // suspending the job that was waiting, never retried.
  EXPECT_EQ(stats.packs, 1);
  EXPECT_EQ(stats.unpacks, 1);
  ASSERT_EQ(stats.pack_trials.size(), 1u);
  EXPECT_FALSE(stats.pack_trials[0].kept);
  EXPECT_DOUBLE_EQ(stats.pack_trials[0].guest_rate + stats.pack_trials[0].resident_rate, 0.6);
  // 60 s packed at 0.3 (18 s of work each), then one at a time: 982 s left each.
  EXPECT_NEAR(r.jobs[0].finish, 60 + 982, 1e-6);
  EXPECT_NEAR(r.jobs[1].finish, 60 + 982 * 2, 1e-6);
}

TEST_F(GandivaPackingTest, PairThatDoesNotFitInMemoryIsNeverPacked) {
  PolicyStats stats;
  SimResult r = Replay(topo_, perf_, Jobs({{0, 100, 1, b_}, {0, 100, 1, b_}}), "gandiva",
                       testing::ExactConfig(), {}, &stats);
  EXPECT_EQ(stats.packs, 0);
  EXPECT_EQ(stats.time_slices, 0);
  EXPECT_DOUBLE_EQ(r.jobs[1].first_start, 100);  // waited for the GPU
}

// The policy says how a job is preempted: a newcomer that fits in memory
// beside it leaves it parked (it resumes after --park-cost), one that does not
// has it checkpointed and stopped (it restarts after --preempt-cost).
TEST_F(GandivaPackingTest, PreemptionParksUnlessTheNewcomerDoesNotFitBesideIt) {
  const SimConfig c = ParkAndStopCosts();
  const PolicyOptions o = OneLevelAt100();
  // a runs 0..100 and drops a level; b runs 100..200 and drops too; a, first
  // in the level, resumes at 200 with its stall and has 900 s left.
  SimResult fits = Replay(topo_, perf_, Jobs({{0, 1000, 1, a_}, {50, 1000, 1, a_}}), "las", c, o);
  EXPECT_DOUBLE_EQ(fits.jobs[0].finish, 200 + 1 + 900);
  // (gandiva packs a pair that fits and pays instead: PackingKeptWhen...)
  for (const char* policy : {"las", "gandiva"}) {
    SimResult does_not =
        Replay(topo_, perf_, Jobs({{0, 1000, 1, b_}, {50, 1000, 1, b_}}), policy, c, o);
    EXPECT_DOUBLE_EQ(does_not.jobs[0].finish, 200 + 10 + 900) << policy;
    EXPECT_EQ(does_not.jobs[0].preemptions, 1) << policy;
  }
}

// A job that cannot restart is never stopped: the simulator refuses it, and
// the policies park it even where the newcomer does not fit beside it.
TEST_F(GandivaPackingTest, JobThatCannotRestartIsParked) {
  const SimConfig c = ParkAndStopCosts();
  const PolicyOptions o = OneLevelAt100();
  auto jobs = Jobs({{0, 1000, 1, b_}, {50, 1000, 1, b_}});
  jobs[0].info.restartable = false;
  SimResult r = Replay(topo_, perf_, jobs, "las", c, o);
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 200 + 1 + 900);

  // Asked directly, in the middle of a replay (a policy that stops it).
  class StopsTheFirst final : public Policy {
   public:
    void OnArrival(Cluster& c, JobId j) override {
      if (j == 0) {
        ASSERT_TRUE(c.Start(0, std::vector<GpuId>{0}).ok());
        return;
      }
      refused = c.Suspend(0, Preemption::kStop);
      ASSERT_TRUE(c.Suspend(0, Preemption::kPark).ok());
      ASSERT_TRUE(c.Start(1, std::vector<GpuId>{0}).ok());
    }
    void OnFinish(Cluster& c, JobId j) override {
      if (j == 1) {
        ASSERT_TRUE(c.Start(0, std::vector<GpuId>{0}).ok());
      }
    }
    void Schedule(Cluster&) override {}
    const char* name() const override { return "stops-the-first"; }
    Status refused;
  } policy;
  SimCluster cluster(topo_, &perf_, jobs, c);
  ASSERT_TRUE(cluster.Run(policy).ok());
  EXPECT_EQ(policy.refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(policy.refused.message().find("only be parked"), std::string::npos);
}

TEST(GandivaTest, NewcomerSuspendsAJobOfALowerLevel) {
  Topology topo = Topology::Uniform(1, 1);
  PerfModel perf = PerfModel::Neutral();
  PolicyOptions o;
  o.las_thresholds = {100};
  // Like LAS: a reaches 100 GPU-s at t=100 and drops a level; b, which has had
  // no service, suspends it then (rather than waiting, or sharing from t=50).
  SimResult r =
      Replay(topo, perf, Jobs({{0, 1000}, {50, 1000}}), "gandiva", testing::ExactConfig(), o);
  EXPECT_DOUBLE_EQ(r.jobs[1].first_start, 100);
  EXPECT_EQ(r.jobs[0].preemptions, 1);
  EXPECT_DOUBLE_EQ(r.jobs[0].finish, 1100);  // first come first served within level 1
}

TEST(GandivaTest, GangGetsOneMachineByMovingASingleGpuJob) {
  // Two machines of two GPUs. Jobs 0 and 2 run long on one GPU of each machine
  // once job 1 has finished: the two free GPUs are on different machines.
  Topology topo = Topology::Uniform(2, 2);
  PerfModel perf = PerfModel::Neutral();
  SimResult r = Replay(topo, perf, Jobs({{0, 5000}, {0, 100}, {0, 5000}, {200, 1000, 2}}),
                       "gandiva", testing::ExactConfig());
  // One single-GPU job moves over; the gang starts at once on one machine and
  // runs at full speed (spread over both it would run at 0.75).
  EXPECT_EQ(r.migrations, 1);
  EXPECT_DOUBLE_EQ(r.jobs[3].first_start, 200);
  EXPECT_DOUBLE_EQ(r.jobs[3].finish, 1200);
}

TEST(GandivaTest, GangClearsOneMachineInsteadOfSpreading) {
  // Two machines of two GPUs, four single-GPU jobs, all a level down by the
  // time a 2-GPU job arrives. The two lowest-ranked (jobs 3 and 4, the latest
  // submitted) are on different machines: LAS would suspend them and run the
  // gang spread. Gandiva suspends the two jobs of one machine instead.
  Topology topo = Topology::Uniform(2, 2);
  PerfModel perf = PerfModel::Neutral();
  PolicyOptions o;
  o.las_thresholds = {100};
  // The gang is short (80 GPU-s): it finishes before it drops a level too.
  auto jobs = Jobs({{0, 5000}, {0, 40}, {2, 5000}, {3, 5000}, {50, 5000}, {300, 40, 2}});
  SimResult r = Replay(topo, perf, jobs, "gandiva", testing::ExactConfig(), o);
  EXPECT_DOUBLE_EQ(r.jobs[5].first_start, 300);
  EXPECT_DOUBLE_EQ(r.jobs[5].finish, 340);  // consolidated: full speed
  SimResult las = Replay(topo, perf, jobs, "las", testing::ExactConfig(), o);
  EXPECT_GT(las.jobs[5].finish, 340);  // LAS ran it spread, slower
}

TEST(ReservePackTest, BigJobsGetHighEndMachinesSmallOnesPack) {
  // Machine 0: two 12 GB GPUs (low end); machine 1: four 24 GB GPUs (high end).
  Topology topo = Topology::Build({{"12GB", "p100", 12, false}, {"24GB", "p100", 24, true}},
                                  {{"lo", 0, 0, 2}, {"hi", 1, 0, 4}});
  PerfModel perf = PerfModel::Neutral();
  PolicyStats stats;
  // Three 1-GPU jobs and a 4-GPU job: the big one gets the high end, the
  // small ones stay on the low end and the third packs with one of them.
  SimResult r = Replay(topo, perf, Jobs({{0, 100}, {0, 100}, {0, 100}, {0, 100, 4}}),
                       "reserve-pack", testing::ExactConfig(), {}, &stats);
  EXPECT_EQ(stats.packs, 1);
  EXPECT_DOUBLE_EQ(r.jobs[3].first_start, 0);
  EXPECT_DOUBLE_EQ(r.jobs[3].finish, 100);
  EXPECT_DOUBLE_EQ(r.jobs[2].finish, 200);  // packed at half speed (neutral model)
}

TEST(SjfPredictedTest, PredictorBacksOffAndLearnsOnlyFromFinishedJobs) {
  DurationPredictor p(/*min_samples=*/2, /*prior_seconds=*/3600);
  JobInfo a;
  a.vc = 1;
  a.num_gpus = 1;
  EXPECT_DOUBLE_EQ(p.Predict(a), 3600);
  p.Observe(a, 100);
  EXPECT_DOUBLE_EQ(p.Predict(a), 3600);  // one sample is not enough
  p.Observe(a, 400);
  EXPECT_NEAR(p.Predict(a), 200, 1e-9);  // geometric mean
  JobInfo b = a;
  b.vc = 2;
  EXPECT_NEAR(p.Predict(b), 200, 1e-9);  // unseen VC: falls back to (GPUs)
}

TEST(SjfPredictedTest, JobPredictedShortOvertakesJobPredictedLong) {
  Topology topo = Topology::Uniform(1, 1);
  PerfModel perf = PerfModel::Neutral();
  // Phase 1 teaches the predictor: VC 2 runs 500 s jobs, VC 1 runs 10 s jobs.
  // Phase 2: behind a blocker, a VC 2 job queues first and a VC 1 job second.
  std::vector<SimJobSpec> jobs = Jobs({{0, 500},
                                       {1, 500},
                                       {2, 500},
                                       {3, 10},
                                       {4, 10},
                                       {5, 10},
                                       {2000, 100},
                                       {2001, 100},
                                       {2002, 10}});
  for (int i : {0, 1, 2, 6, 7}) jobs[i].info.vc = 2;
  for (int i : {3, 4, 5, 8}) jobs[i].info.vc = 1;
  SimResult r = Replay(topo, perf, jobs, "sjf-predicted");
  EXPECT_DOUBLE_EQ(r.jobs[8].first_start, 2100);  // predicted 10 s: first
  EXPECT_DOUBLE_EQ(r.jobs[7].first_start, 2110);  // predicted 500 s: after
  SimResult fifo = Replay(topo, perf, jobs, "fifo");
  EXPECT_DOUBLE_EQ(fifo.jobs[7].first_start, 2100);
}

TEST(SjfPredictedTest, BothPredictorsRecordEachJobsPredictionBesideItsRunTime) {
  Topology topo = Topology::Uniform(1, 1);
  PerfModel perf = PerfModel::Neutral();
  std::vector<SimJobSpec> jobs = Jobs({{0, 500}, {1, 500}, {2, 500}, {3, 500}});
  for (const char* policy : {"sjf-predicted", "sjf-tree"}) {
    SimResult r = Replay(topo, perf, jobs, policy);
    ASSERT_EQ(r.policy.predictions.size(), jobs.size()) << policy;
    for (const auto& p : r.policy.predictions) EXPECT_DOUBLE_EQ(p.actual, 500) << policy;
    // All four arrive before any finishes: each gets the 1 h prior.
    for (const auto& p : r.policy.predictions) EXPECT_DOUBLE_EQ(p.predicted, 3600) << policy;
  }
  EXPECT_TRUE(Replay(topo, perf, jobs, "fifo").policy.predictions.empty());
}

TEST(PolicyFactoryTest, UnknownNameIsInvalidArgument) {
  auto p = MakePolicy("random", {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  for (const auto& name : PolicyNames()) EXPECT_TRUE(MakePolicy(name, {}).ok()) << name;
}

}  // namespace
}  // namespace gandiva::sched
