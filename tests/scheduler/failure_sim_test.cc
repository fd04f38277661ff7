// The failure model (Philly's Table 3) and the failure-handling replay: a
// crash at start caught by validation, a late one not, infrastructure retries
// with their backoff and limit, the cost of a validation slice to the job it
// shares with, determinism and totals.
#include "gandiva/scheduler/failure_sim.h"

#include <cmath>

#include "sim_test_util.h"

namespace gandiva::sched {
namespace {

using testing::J;
using testing::Jobs;

// One reason that always fails at `seconds` (the three percentiles equal).
FailureReason Fixed(double seconds, ExitClass seen_as, bool transient, double trials = 1) {
  FailureReason r;
  r.name = "fixed";
  r.seen_as = seen_as;
  r.transient = transient;
  r.trials = trials;
  r.jobs = 1;
  r.p50 = r.p90 = r.p95 = seconds / 60;
  return r;
}

FailureModel Model(FailureReason r, double failing_share = 1, double retry_success = 0) {
  FailureModelOptions o;
  o.failing_share = failing_share;
  o.retry_success = retry_success;
  auto m = FailureModel::Make({std::move(r)}, o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

FailureSimResult Replay(const std::vector<SimJobSpec>& jobs, const FailureModel& model,
                        FailureVariant v, int machines = 1, int gpus = 1) {
  FailureSimConfig c;
  c.variant = v;
  // Neutral model: no iteration times, so validation = 60 s + 100 x 0.5 s = 110 s.
  static const PerfModel perf = PerfModel::Neutral();
  auto r = RunFailureSim(Topology::Uniform(machines, gpus), perf, jobs, model, c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : FailureSimResult{};
}

TEST(FailureSimTest, UserErrorAtStartIsCaughtInValidationAndNotRetried) {
  const auto jobs = Jobs({J{0, 3600}});
  const FailureModel model = Model(Fixed(30, ExitClass::kUser, false, /*trials=*/3));
  const FailureSimResult v = Replay(jobs, model, FailureVariant::kValidate);
  EXPECT_EQ(v.caught_in_validation, 1);
  EXPECT_EQ(v.failed, 1);
  EXPECT_EQ(v.retries, 0);
  EXPECT_EQ(v.attempts, 0);  // it never queued for a full allocation
  EXPECT_DOUBLE_EQ(v.report_p50, 30);
  EXPECT_DOUBLE_EQ(v.failed_gpu_hours, 30.0 / 3600);
  // Classified without validation: one run, reported when it crashes.
  const FailureSimResult c = Replay(jobs, model, FailureVariant::kClassify);
  EXPECT_EQ(c.attempts, 1);
  EXPECT_EQ(c.retries, 0);
  EXPECT_DOUBLE_EQ(c.report_p50, 30);
  // Philly retries it as often as the study counted (3 trials for 1 job).
  const FailureSimResult p = Replay(jobs, model, FailureVariant::kPhilly);
  EXPECT_EQ(p.attempts, 3);
  EXPECT_EQ(p.retries, 2);
  EXPECT_DOUBLE_EQ(p.report_p50, 90);
  EXPECT_DOUBLE_EQ(p.failed_gpu_hours, 90.0 / 3600);
}

TEST(FailureSimTest, ValidationRunsOneCopyOnOneGpu) {
  // A 4-GPU job that crashes 30 s in: caught on one GPU, not on four.
  const auto jobs = Jobs({J{0, 3600, /*gpus=*/4}});
  const FailureModel model = Model(Fixed(30, ExitClass::kUser, false));
  const FailureSimResult v = Replay(jobs, model, FailureVariant::kValidate, 1, 4);
  EXPECT_EQ(v.caught_in_validation, 1);
  EXPECT_DOUBLE_EQ(v.failed_gpu_hours, 30.0 / 3600);
  EXPECT_DOUBLE_EQ(v.total_gpu_hours, 30.0 / 3600);
  const FailureSimResult c = Replay(jobs, model, FailureVariant::kClassify, 1, 4);
  EXPECT_DOUBLE_EQ(c.failed_gpu_hours, 4 * 30.0 / 3600);
}

TEST(FailureSimTest, FailureAfterTheValidationWindowIsNotCaught) {
  const auto jobs = Jobs({J{0, 3600}});
  const FailureModel model = Model(Fixed(600, ExitClass::kUser, false));
  const FailureSimResult v = Replay(jobs, model, FailureVariant::kValidate);
  EXPECT_EQ(v.validations, 1);
  EXPECT_EQ(v.caught_in_validation, 0);
  EXPECT_EQ(v.attempts, 1);
  EXPECT_DOUBLE_EQ(v.report_p50, 110 + 600);  // validated, queued, failed 10 min in
  EXPECT_DOUBLE_EQ(v.validation_gpu_hours, 110.0 / 3600);
  EXPECT_DOUBLE_EQ(v.failed_gpu_hours, 600.0 / 3600);
  EXPECT_DOUBLE_EQ(v.total_gpu_hours, 710.0 / 3600);
  EXPECT_DOUBLE_EQ(v.wasted_gpu_hours(), 710.0 / 3600);
}

TEST(FailureSimTest, InfrastructureFailureRetriedWithBackoffUpToTheLimit) {
  const auto jobs = Jobs({J{0, 3600}});
  // Every retry fails too: fail at 30; retry at 40 (10 s backoff), fail at 70;
  // retry at 90 (20 s), fail at 120; retry at 160 (40 s), fail at 190: the
  // limit of 3 retries is reached and the failure reported.
  const FailureModel never = Model(Fixed(30, ExitClass::kInfra, true), 1, /*retry_success=*/0);
  const FailureSimResult c = Replay(jobs, never, FailureVariant::kClassify);
  EXPECT_EQ(c.attempts, 4);
  EXPECT_EQ(c.retries, 3);
  EXPECT_EQ(c.failed, 1);
  EXPECT_DOUBLE_EQ(c.report_p50, 190);
  EXPECT_DOUBLE_EQ(c.failed_gpu_hours, 4 * 30.0 / 3600);
  // Philly retries at once, up to 5 attempts in all.
  const FailureSimResult p = Replay(jobs, never, FailureVariant::kPhilly);
  EXPECT_EQ(p.attempts, 5);
  EXPECT_DOUBLE_EQ(p.report_p50, 150);
  // A transient failure does not strike the validation run (it is not the
  // job's doing): validated 0-110, the runs fail at 140, 180 (after 10 s),
  // 230 (20 s) and 300 (40 s); retries do not validate again.
  const FailureSimResult v = Replay(jobs, never, FailureVariant::kValidate);
  EXPECT_EQ(v.validations, 1);
  EXPECT_EQ(v.caught_in_validation, 0);
  EXPECT_EQ(v.attempts, 4);
  EXPECT_DOUBLE_EQ(v.report_p50, 300);
  // When the retry succeeds the job finishes, one backoff late.
  const FailureModel always = Model(Fixed(30, ExitClass::kInfra, true), 1, /*retry_success=*/1);
  const FailureSimResult ok = Replay(jobs, always, FailureVariant::kClassify);
  EXPECT_EQ(ok.succeeded, 1);
  EXPECT_EQ(ok.failed, 0);
  EXPECT_EQ(ok.retries, 1);
  EXPECT_DOUBLE_EQ(ok.makespan, 30 + 10 + 3600);
}

TEST(FailureSimTest, BackoffIsCappedAndAPreemptionIsRequeuedAtOnce) {
  const auto jobs = Jobs({J{0, 3600}});
  FailureSimConfig c;
  c.variant = FailureVariant::kClassify;
  c.retry_limit = 2;
  c.backoff_seconds = 500;
  c.max_backoff_seconds = 600;
  // Fail at 30, retry at 530, fail at 560, retry at 1160 (600, not 1000), fail
  // at 1190.
  const FailureModel never = Model(Fixed(30, ExitClass::kInfra, true), 1, 0);
  auto r = RunFailureSim(Topology::Uniform(1, 1), PerfModel::Neutral(), jobs, never, c);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->report_p50, 1190);
  // A preempted job goes back to the queue at once, whatever the limit.
  c.retry_limit = 0;
  const FailureModel preempted = Model(Fixed(30, ExitClass::kPreempted, true), 1, 1);
  r = RunFailureSim(Topology::Uniform(1, 1), PerfModel::Neutral(), jobs, preempted, c);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->succeeded, 1);
  EXPECT_DOUBLE_EQ(r->makespan, 30 + 3600);
}

TEST(FailureSimTest, ValidationSlicesARunningJobAndDelaysIt) {
  // One GPU. A validates 0-110 on the free GPU and runs 110-1110. B arrives at
  // 200 and validates on A's GPU (110 s, plus 1 s to suspend and resume A), so
  // A ends at 1221 and B, queued at 310, runs 1221-2221.
  const auto jobs = Jobs({J{0, 1000}, J{200, 1000}});
  const FailureModel none = Model(Fixed(30, ExitClass::kUser, false), /*failing_share=*/0);
  const FailureSimResult v = Replay(jobs, none, FailureVariant::kValidate);
  EXPECT_EQ(v.succeeded, 2);
  EXPECT_EQ(v.validations, 2);
  EXPECT_DOUBLE_EQ(v.makespan, 2221);
  EXPECT_DOUBLE_EQ(v.ok_jct_mean, (1221 + (2221 - 200)) / 2.0);
  EXPECT_DOUBLE_EQ(v.ok_wait_mean, (110 + (1221 - 200)) / 2.0);
  EXPECT_NEAR(v.slice_overhead_gpu_hours, 1.0 / 3600, 1e-12);
  EXPECT_NEAR(v.total_gpu_hours, (2000 + 220 + 1) / 3600.0, 1e-12);
  EXPECT_NEAR(v.useful_gpu_hours, 2000 / 3600.0, 1e-12);
  // Without failures, the other variants spend exactly the jobs' work.
  const FailureSimResult p = Replay(jobs, none, FailureVariant::kPhilly);
  EXPECT_DOUBLE_EQ(p.total_gpu_hours, 2000 / 3600.0);
  EXPECT_DOUBLE_EQ(p.failed_gpu_hours, 0);
  EXPECT_DOUBLE_EQ(p.makespan, 2000);
}

TEST(FailureSimTest, ValidationSlicesSpreadOverRunningJobs) {
  // Two GPUs: A and B validate at 0-110 and run 110-1110. C (at 200) slices
  // A, so D (at 400) slices B, not A again: both end at 1221, and C and D,
  // queued by then, run 1221-2221.
  const auto jobs = Jobs({J{0, 1000}, J{0, 1000}, J{200, 1000}, J{400, 1000}});
  const FailureModel none = Model(Fixed(30, ExitClass::kUser, false), /*failing_share=*/0);
  const FailureSimResult v = Replay(jobs, none, FailureVariant::kValidate, 1, 2);
  EXPECT_EQ(v.succeeded, 4);
  EXPECT_DOUBLE_EQ(v.makespan, 2221);
}

TEST(FailureSimTest, TotalsAddUpOnAPhillyLikeWorkload) {
  std::vector<J> js;
  for (int i = 0; i < 3000; ++i)
    js.push_back(J{i * 20.0, 60.0 + (i * 7919 % 20000), i % 10 == 0 ? 8 : 1});
  const auto jobs = Jobs(js);
  auto model = FailureModel::Make(PhillyFailureReasons(), {});
  ASSERT_TRUE(model.ok());
  double work = 0;
  for (const auto& j : jobs) work += j.info.num_gpus * j.duration / 3600;
  for (auto variant :
       {FailureVariant::kPhilly, FailureVariant::kClassify, FailureVariant::kValidate}) {
    const FailureSimResult r = Replay(jobs, *model, variant, 4, 8);
    EXPECT_EQ(r.succeeded + r.failed, 3000) << r.variant;
    EXPECT_GE(r.succeeded_jct_mean, r.ok_jct_mean * 0.5) << r.variant;
    EXPECT_GT(r.failing_jobs, 400) << r.variant;
    EXPECT_LE(r.useful_gpu_hours, work + 1e-9) << r.variant;
    const double waste = r.failed_gpu_hours + r.validation_gpu_hours + r.slice_overhead_gpu_hours;
    if (variant == FailureVariant::kValidate) {
      // Failures caught in validation count as failed and as validation time.
      EXPECT_LE(r.wasted_gpu_hours(), waste + 1e-9);
      EXPECT_GE(r.wasted_gpu_hours(), r.failed_gpu_hours - 1e-9);
    } else {
      EXPECT_NEAR(r.wasted_gpu_hours(), r.failed_gpu_hours, 1e-6) << r.variant;
      EXPECT_EQ(r.validations, 0);
    }
  }
  // Classifying never retries more than Philly does on the same draws.
  const FailureSimResult p = Replay(jobs, *model, FailureVariant::kPhilly, 4, 8);
  const FailureSimResult c = Replay(jobs, *model, FailureVariant::kClassify, 4, 8);
  EXPECT_LT(c.retries, p.retries);
  EXPECT_LT(c.failed_gpu_hours, p.failed_gpu_hours);
}

TEST(FailureSimTest, PhillyModelIsDeterministicAndMatchesTheStudyShares) {
  FailureModelOptions o;
  auto a = FailureModel::Make(PhillyFailureReasons(), o);
  auto b = FailureModel::Make(PhillyFailureReasons(), o);
  o.seed = 2;
  auto c = FailureModel::Make(PhillyFailureReasons(), o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  int failing = 0, differ = 0, user_like = 0;
  constexpr int kJobs = 20000;
  for (int j = 0; j < kJobs; ++j) {
    const int r = a->Fate(j).reason;
    EXPECT_EQ(r, b->Fate(j).reason);
    differ += r != c->Fate(j).reason;
    if (r < 0) continue;
    ++failing;
    EXPECT_EQ(a->RunToFailure(j, r, 0), b->RunToFailure(j, r, 0));
    user_like += a->reasons()[r].seen_as == ExitClass::kUser;
  }
  EXPECT_GT(differ, 0);
  EXPECT_NEAR(failing / double(kJobs), 17579.0 / 96260, 0.01);
  // Jobs with reasons an exit classifier calls user errors: (17,579 - 691) / 17,579.
  EXPECT_NEAR(user_like / double(failing), (17579.0 - 691) / 17579, 0.02);
}

TEST(FailureSimTest, RtfQuantilesHitThePublishedPercentilesAndShares) {
  auto m = FailureModel::Make(PhillyFailureReasons(), {});
  ASSERT_TRUE(m.ok());
  double total = 0;
  std::vector<double> sums;
  for (const auto& r : m->reasons()) {
    EXPECT_NEAR(FailureModel::RtfQuantile(r, 0.5), r.p50, 1e-6 * r.p50) << r.name;
    EXPECT_NEAR(FailureModel::RtfQuantile(r, 0.9), r.p90, 1e-6 * r.p90) << r.name;
    EXPECT_NEAR(FailureModel::RtfQuantile(r, 0.95), r.p95, 1e-6 * r.p95) << r.name;
    // Mean RTF x trials, by the midpoint rule over the quantile function.
    double mean = 0;
    constexpr int kSteps = 20000;
    for (int i = 0; i < kSteps; ++i) mean += FailureModel::RtfQuantile(r, (i + 0.5) / kSteps);
    sums.push_back(mean / kSteps * r.trials);
    total += sums.back();
  }
  // The unpublished tails make each reason's share of all RTF the published one
  // (zero-share reasons aside, which add a little).
  for (size_t i = 0; i < sums.size(); ++i)
    EXPECT_NEAR(100 * sums[i] / total, m->reasons()[i].rtf_share, 0.3) << m->reasons()[i].name;
}

TEST(FailureSimTest, RejectsBadSettings) {
  FailureReason r = Fixed(30, ExitClass::kUser, false);
  r.p90 = r.p50 / 2;
  EXPECT_FALSE(FailureModel::Make({r}, {}).ok());
  FailureModelOptions o;
  o.retry_success = 1.5;
  EXPECT_FALSE(FailureModel::Make(PhillyFailureReasons(), o).ok());
  const FailureModel model = Model(Fixed(30, ExitClass::kUser, false));
  FailureSimConfig c;
  c.retry_limit = -1;
  EXPECT_FALSE(
      RunFailureSim(Topology::Uniform(1, 1), PerfModel::Neutral(), Jobs({J{0, 10}}), model, c)
          .ok());
  EXPECT_FALSE(RunFailureSim(Topology::Uniform(1, 1), PerfModel::Neutral(),
                             Jobs({J{0, 10, /*gpus=*/2}}), model, {})
                   .ok());
  EXPECT_FALSE(ParseFailureVariant("retry-all").ok());
}

}  // namespace
}  // namespace gandiva::sched
