// The metrics of one simulated run (JCT, queueing, utilisation, counts,
// fairness) and their table and JSON forms.
#ifndef GANDIVA_SCHED_REPORT_H_
#define GANDIVA_SCHED_REPORT_H_

#include <string>
#include <vector>

#include "gandiva/scheduler/sim_cluster.h"

namespace gandiva::sched {

struct SizeClass {
  std::string label;  // "1", "2-4", "5-8", ">8"
  int64_t jobs = 0;
  double avg_jct = 0;
};

struct Report {
  std::string policy;
  int64_t jobs = 0;
  double avg_jct = 0, median_jct = 0, p99_jct = 0;    // seconds
  double avg_queue = 0, p99_queue = 0;                // first start - submit
  double makespan = 0;                                // last finish - first submit
  double util_allocated = 0, util_effective = 0;      // over the makespan
  double window_allocated = 0, window_effective = 0;  // first to last submission
  int64_t preemptions = 0, migrations = 0, packs = 0, unpacks = 0, time_slices = 0, resizes = 0;
  // Finish-time fairness: rho = JCT / duration alone (1 = as if alone, no wait).
  double ftf_mean = 0, ftf_p99 = 0, ftf_max = 0;
  double frac_ftf_over_2 = 0;  // share of jobs finishing more than 2x later than alone
  std::vector<SizeClass> by_size;
  // Duration prediction (policies that predict; predicted_jobs 0 otherwise),
  // each job's prediction at submission against the time it ran.
  int64_t predicted_jobs = 0;
  double pred_median_abs_error = 0;  // seconds
  double pred_median_ratio = 0;      // median of max(p/a, a/p): 1 = exact
  double pred_rmsle = 0;             // sqrt(mean((ln p - ln a)^2)), times floored at 1 s
  int64_t events = 0;
  double sim_seconds = 0;  // wall time of the run; filled by the caller, 0 in tests
  SimResult result;        // raw per-job records and the utilisation series
};

Report MakeReport(const std::string& policy, SimResult result);

// JSON for a set of runs: {"trace":..., "runs":[{metrics, "jct_cdf":[...], "util":[...]}]}.
// The CDF is sampled at `cdf_points` quantiles so the file stays small.
std::string ReportsToJson(const std::vector<Report>& reports, const std::string& trace_name,
                          const std::string& cluster_name, int cdf_points = 200);
// A side-by-side text table; with a "fifo" run present, ratios against it.
std::string FormatTable(const std::vector<Report>& reports);

}  // namespace gandiva::sched

#endif  // GANDIVA_SCHED_REPORT_H_
