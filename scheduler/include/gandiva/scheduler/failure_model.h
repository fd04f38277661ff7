// Job failures on Philly, modelled from the published study (Jeon et al.,
// "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training
// Workloads", USENIX ATC'19, section 4.2 and Table 3): which trace jobs fail,
// why, after how long, and whether a retry can succeed. The trace has no
// status column, so every figure here comes from the paper (docs/simulator.md
// says which); each job's fate is a hash of (seed, job id), like its type.
#ifndef GANDIVA_SCHED_FAILURE_MODEL_H_
#define GANDIVA_SCHED_FAILURE_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gandiva/status.h"

namespace gandiva::sched {

// What an exit classifier can see when a job ends (not the root cause).
enum class ExitClass : uint8_t {
  kUser,       // the job's own process exited non-zero: its code, inputs, config
  kInfra,      // node lost, daemon gone, device error: not the job's doing
  kPreempted,  // the scheduler took the GPUs back
};

// One failure reason of the paper's Table 3.
struct FailureReason {
  std::string name;
  std::string category;  // the paper's: "IF" infrastructure, "AE" AI engine, "U" user
  ExitClass seen_as = ExitClass::kUser;
  // Transient: a retry may succeed (infrastructure hiccups); otherwise the
  // failure repeats on every retry (the paper: failures repeat across trials).
  bool transient = false;
  double trials = 0, jobs = 0;       // failed trials and jobs with the reason (Table 3)
  double p50 = 0, p90 = 0, p95 = 0;  // run time to failure percentiles, minutes
  double rtf_share = 0;  // share of all failures' total run time to failure (Table 3 "Total %")
  // Mean of the top 5% of runs to failure, minutes: not published; set so
  // the reason's mean RTF matches its rtf_share (FailureModel computes it).
  double tail_mean = 0;
};

// The reasons of Table 3, with the classification above (docs/simulator.md).
std::vector<FailureReason> PhillyFailureReasons();

struct FailureModelOptions {
  uint64_t seed = 1;
  // Share of jobs whose first attempt fails: Table 3's jobs (17,579) over all
  // jobs of the study (96,260, from "12,996 killed = 13.5%").
  double failing_share = 17579.0 / 96260.0;
  // A retry of a transient failure succeeds with this probability: Table 3's
  // jobs / trials pooled over the transient reasons (1,639 / 3,264).
  double retry_success = 0.5;
};

// One job's modelled fate.
struct JobFate {
  int reason = -1;  // index into reasons(); -1: the job never fails
};

class FailureModel {
 public:
  // Errors: invalid_argument for a share or probability outside [0, 1] or a
  // reason whose percentiles are not increasing.
  static StatusOr<FailureModel> Make(std::vector<FailureReason> reasons,
                                     const FailureModelOptions& options);

  const std::vector<FailureReason>& reasons() const { return reasons_; }
  const FailureModelOptions& options() const { return options_; }

  JobFate Fate(int64_t job) const;
  // Seconds into attempt `attempt` (0 = first) at which a job of `reason`
  // fails, before clipping to its duration. A repeating failure fails at the
  // same point on every attempt; a transient one draws afresh.
  double RunToFailure(int64_t job, int reason, int attempt) const;
  // Whether retry `attempt` (>= 1) of a transient failure succeeds.
  bool RetrySucceeds(int64_t job, int attempt) const;
  // Philly's trials for a repeating failure: Table 3's trials per job for the
  // reason, as floor or ceil so the mean matches.
  int PhillyTrials(int64_t job, int reason) const;

  // The RTF quantile function of a reason, minutes: through the published 50th,
  // 90th and 95th percentiles (log-linear in the normal score), and above the
  // 95th an exponential tail with mean tail_mean. u in (0, 1).
  static double RtfQuantile(const FailureReason& r, double u);

 private:
  FailureModel(std::vector<FailureReason> reasons, FailureModelOptions options)
      : reasons_(std::move(reasons)), options_(options) {}
  double Uniform(int64_t job, uint64_t salt, int attempt) const;  // in (0, 1)

  std::vector<FailureReason> reasons_;
  std::vector<double> cumulative_jobs_;  // for drawing a reason by its job share
  FailureModelOptions options_;
};

// The standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9).
double NormalQuantile(double p);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_FAILURE_MODEL_H_
