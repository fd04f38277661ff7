// `gandiva sim --failures`: what failed jobs cost a GPU cluster under three
// ways of handling them (issue 16, item 3), on a trace with failures from
// FailureModel.
//   philly    Philly as the study saw it: every failure retried, at once, as
//             many times as the study counted trials per job for that reason.
//   classify  the exit is classified; only infrastructure failures are
//             retried, at most retry_limit times, after an exponential backoff;
//             a preempted job is requeued at once.
//   validate  classify, plus a validation run before a new job queues: its
//             first N iterations, one copy on one GPU, in a short time slice
//             on a GPU it shares, so a job that crashes at start fails in
//             seconds (and on one GPU rather than its whole gang).
// The cluster is gang-scheduled first come first served (head of line
// blocks), consolidated on the fewest machines when it can be; jobs run at
// their trace speed. docs/simulator.md has the model and its sources.
#ifndef GANDIVA_SCHED_FAILURE_SIM_H_
#define GANDIVA_SCHED_FAILURE_SIM_H_

#include <string>
#include <vector>

#include "gandiva/scheduler/failure_model.h"
#include "gandiva/scheduler/perf_model.h"
#include "gandiva/scheduler/sim_cluster.h"
#include "gandiva/scheduler/topology.h"
#include "gandiva/status.h"

namespace gandiva::sched {

enum class FailureVariant { kPhilly, kClassify, kValidate };
const char* FailureVariantName(FailureVariant v);
// "philly", "classify", "validate". Errors: invalid_argument.
StatusOr<FailureVariant> ParseFailureVariant(const std::string& name);

struct FailureSimConfig {
  FailureVariant variant = FailureVariant::kPhilly;
  // Philly: a transient failure is retried until it succeeds or the job has
  // made this many attempts (the study gives no limit; see the docs).
  int philly_max_trials = 5;
  // classify / validate, with the live scheduler's defaults
  // (scheduler/live/retry_policy.h).
  int retry_limit = 3;               // retries of infrastructure failures per job
  double backoff_seconds = 10;       // before retry k: backoff * 2^(k-1) ...
  double max_backoff_seconds = 600;  // ... but no longer than this
  // validate: iterations run before queuing, and what starting the job costs
  // (container, framework, first data) before the first iteration.
  int validate_iterations = 100;
  double validate_startup_seconds = 60;
  double switch_seconds = 1;  // a co-runner's suspend + resume around the slice
  // Iteration time of a type without a measurement (steps/s of the table).
  double default_iteration_seconds = 0.5;
  std::string ref_perf_class = "p100";  // the class trace durations were measured on
  // A failing run stops at its run time to failure, or at its trace duration
  // if that comes first: the trace says how long the job held its GPUs. Off:
  // the run lasts its whole run time to failure (an upper bound).
  bool clip_to_duration = true;
};

struct FailureSimResult {
  std::string variant;
  int64_t jobs = 0;
  int64_t failing_jobs = 0;          // jobs the model fails at least once
  int64_t succeeded = 0;             // jobs that finished their work
  int64_t failed = 0;                // jobs whose failure was reported to the user
  int64_t attempts = 0;              // full runs started (first runs and retries)
  int64_t retries = 0;               // attempts after a failure (preemption requeues included)
  int64_t validations = 0;           // validation runs started
  int64_t caught_in_validation = 0;  // failures that happened inside one
  double failed_gpu_hours = 0;       // GPU time of attempts (and validations) that failed
  double validation_gpu_hours = 0;   // GPU time of every validation run
  double total_gpu_hours = 0;        // every attempt and validation run
  double useful_gpu_hours = 0;       // runs that finished the job's work
  // What failures cost: total - useful (failed runs, validations, slice overhead).
  double wasted_gpu_hours() const { return total_gpu_hours - useful_gpu_hours; }
  // GPU time jobs that shared their GPUs with a validation lost beyond the
  // validation's own: their other GPUs idle during the slice, and switching.
  double slice_overhead_gpu_hours = 0;
  // Submit to the user hearing of a failure (the last failed attempt), seconds.
  double report_p50 = 0, report_p90 = 0, report_mean = 0;
  // Jobs that never fail (the same jobs in every variant): JCT and queueing.
  double ok_jct_mean = 0, ok_wait_mean = 0;
  double succeeded_jct_mean = 0;  // every job that finished, retried ones included
  double makespan = 0;
  double sim_seconds = 0;  // wall time of the run
};

// Replays `jobs` (from BuildJobs) on `topo` under `config`, failing them as
// `model` says. Errors: invalid_argument for a job larger than the cluster or
// a bad setting; internal if the replay ends with work left.
StatusOr<FailureSimResult> RunFailureSim(const Topology& topo, const PerfModel& perf,
                                         const std::vector<SimJobSpec>& jobs,
                                         const FailureModel& model, const FailureSimConfig& config);

struct FailureReport {
  std::string trace, cluster;
  double load = 1;
  FailureModelOptions model;
  FailureSimConfig config;  // the settings of the classify / validate runs
  // The first is the baseline: "saved" is its wasted GPU time less a run's.
  std::vector<FailureSimResult> runs;
};

std::string FormatFailureTable(const FailureReport& report);
std::string FailureReportToJson(const FailureReport& report);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_FAILURE_SIM_H_
