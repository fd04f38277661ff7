// The Philly failure model: Table 3 of Jeon et al. (ATC'19) as data, a job's
// fate and run time to failure as deterministic draws from (seed, job id).
#include "gandiva/scheduler/failure_model.h"

#include <algorithm>
#include <cmath>

namespace gandiva::sched {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr double kTailStart = 0.95;  // the last published percentile

// Mean of a reason's RTF over u in (0, 0.95), times 0.95 (midpoint rule).
double BodyMean(const FailureReason& r) {
  constexpr int kSteps = 4000;
  double sum = 0;
  for (int i = 0; i < kSteps; ++i)
    sum += FailureModel::RtfQuantile(r, kTailStart * (i + 0.5) / kSteps);
  return sum / kSteps * kTailStart;
}

}  // namespace

std::vector<FailureReason> PhillyFailureReasons() {
  using E = ExitClass;
  // name, category, seen as, transient, trials, jobs, RTF p50/p90/p95 (min), Total %.
  return {
      {"CPU out of memory", "U", E::kUser, false, 12076, 2803, 13.45, 17.73, 33.97, 6.62},
      {"Incorrect inputs", "U", E::kUser, false, 9690, 4936, 1.87, 404.83, 2095.73, 30.43},
      {"Semantic error", "U", E::kUser, false, 2943, 2049, 2.72, 376.00, 1436.88, 9.22},
      {"Core dump", "AE/U", E::kUser, false, 2912, 1784, 0.85, 72.75, 431.65, 3.35},
      {"Invalid mem access", "AE/U", E::kUser, false, 2602, 1235, 1.03, 403.50, 1357.38, 3.82},
      // A transient HDFS error while writing a checkpoint: the job's own
      // process throws, so an exit classifier sees a user error.
      {"Model ckpt error", "IF", E::kUser, true, 1995, 948, 181.67, 3728.93, 8196.02, 21.73},
      {"CUDA failure", "AE", E::kUser, false, 1484, 571, 1.32, 19.87, 82.17, 0.62},
      {"Syntax error", "U", E::kUser, false, 1132, 883, 0.58, 5.02, 12.23, 0.19},
      {"Traceback from crash", "AE/U", E::kUser, false, 777, 271, 1.02, 894.33, 1394.07, 2.34},
      // A peer rank lost with its node or daemon: the gang runtime sees which.
      {"MPI error", "IF", E::kInfra, true, 634, 166, 1.62, 3015.27, 5143.98, 3.70},
      {"GPU out of memory", "AE", E::kUser, false, 487, 261, 18.53, 353.62, 2740.28, 1.08},
      {"MPI runtime failure", "IF", E::kInfra, true, 478, 420, 1389.48, 13778.60, 18090.88, 14.63},
      {"Permission error", "U", E::kUser, false, 299, 151, 1.00, 8.15, 15.85, 0.07},
      {"Import error", "IF/U", E::kUser, false, 148, 148, 0.67, 4.58, 10.73, 0.06},
      {"Job preempted", "IF", E::kPreempted, true, 147, 95, 559.08, 2335.25, 5076.98, 1.66},
      {"CUDA init failed", "AE", E::kUser, false, 141, 69, 1.08, 1.30, 1.50, 0.03},
      {"Model diverged", "U", E::kUser, false, 84, 30, 1.48, 7.47, 8.63, 0.01},
      {"CUDA ver. mismatch", "AE", E::kUser, false, 49, 49, 0.83, 0.89, 0.91, 0.00},
      // The device reports it (XID / ECC): an infrastructure failure.
      {"GPU ECC error", "IF", E::kInfra, true, 10, 10, 26.82, 671.92, 2035.02, 0.03},
      {"Output node error", "U", E::kUser, false, 3, 1, 0.85, 0.95, 0.95, 0.00},
      {"Cannot load libs", "AE", E::kUser, false, 1, 1, 0.02, 0.02, 0.02, 0.00},
      // No rule matched the log: treated as the common case, the job's own exit.
      {"No signature", "-", E::kUser, false, 1684, 698, 1.87, 28.00, 95.17, 0.42},
  };
}

double NormalQuantile(double p) {
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  if (p <= 0) return -INFINITY;
  if (p >= 1) return INFINITY;
  if (p < kLow || p > 1 - kLow) {
    const double q = std::sqrt(-2 * std::log(p < kLow ? p : 1 - p));
    const double x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
                     ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
    return p < kLow ? x : -x;
  }
  const double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

double FailureModel::RtfQuantile(const FailureReason& r, double u) {
  static const double z90 = NormalQuantile(0.90), z95 = NormalQuantile(kTailStart);
  if (u > kTailStart) {
    // The top 5% is not published: an exponential tail above the 95th
    // percentile whose mean is tail_mean.
    const double v = (u - kTailStart) / (1 - kTailStart);
    return r.p95 + std::max(0.0, r.tail_mean - r.p95) * -std::log1p(-v);
  }
  const double z = NormalQuantile(u);
  const double l50 = std::log(r.p50), l90 = std::log(r.p90), l95 = std::log(r.p95);
  if (z <= z90) return std::exp(l50 + (l90 - l50) / z90 * z);
  return std::exp(l90 + (l95 - l90) / (z95 - z90) * (z - z90));
}

StatusOr<FailureModel> FailureModel::Make(std::vector<FailureReason> reasons,
                                          const FailureModelOptions& options) {
  if (!(options.failing_share >= 0 && options.failing_share <= 1))
    return InvalidArgument("the failing share must be in [0, 1]");
  if (!(options.retry_success >= 0 && options.retry_success <= 1))
    return InvalidArgument("the retry success probability must be in [0, 1]");
  if (reasons.empty() && options.failing_share > 0)
    return InvalidArgument("jobs fail but no failure reason is given");
  for (const auto& r : reasons)
    if (!(r.p50 > 0 && r.p50 <= r.p90 && r.p90 <= r.p95) || r.jobs <= 0 || r.trials < r.jobs)
      return InvalidArgument("failure reason '" + r.name +
                             "': needs 0 < p50 <= p90 <= p95 and trials >= jobs > 0");
  // Scale the published shares of total RTF to minutes: the smallest total at
  // which every reason's top 5% averages at least its 95th percentile.
  double total_minutes = 0;
  std::vector<double> body(reasons.size());
  for (size_t i = 0; i < reasons.size(); ++i) {
    body[i] = BodyMean(reasons[i]);
    if (reasons[i].rtf_share > 0)
      total_minutes = std::max(total_minutes, (body[i] + (1 - kTailStart) * reasons[i].p95) *
                                                  reasons[i].trials / (reasons[i].rtf_share / 100));
  }
  for (size_t i = 0; i < reasons.size(); ++i) {
    FailureReason& r = reasons[i];
    const double mean = r.rtf_share / 100 * total_minutes / r.trials;
    r.tail_mean = r.rtf_share > 0 ? std::max(r.p95, (mean - body[i]) / (1 - kTailStart)) : r.p95;
  }
  FailureModel m(std::move(reasons), options);
  double sum = 0;
  for (const auto& r : m.reasons_) m.cumulative_jobs_.push_back(sum += r.jobs);
  return m;
}

double FailureModel::Uniform(int64_t job, uint64_t salt, int attempt) const {
  uint64_t h = SplitMix64(SplitMix64(options_.seed ^ (salt << 56)) ^ static_cast<uint64_t>(job));
  h = SplitMix64(h ^ static_cast<uint64_t>(attempt));
  return (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;  // 2^53
}

JobFate FailureModel::Fate(int64_t job) const {
  JobFate f;
  if (Uniform(job, 1, 0) >= options_.failing_share || cumulative_jobs_.empty()) return f;
  const double pick = Uniform(job, 2, 0) * cumulative_jobs_.back();
  f.reason =
      static_cast<int>(std::upper_bound(cumulative_jobs_.begin(), cumulative_jobs_.end(), pick) -
                       cumulative_jobs_.begin());
  f.reason = std::min<int>(f.reason, static_cast<int>(reasons_.size()) - 1);
  return f;
}

double FailureModel::RunToFailure(int64_t job, int reason, int attempt) const {
  const FailureReason& r = reasons_[reason];
  return 60 * RtfQuantile(r, Uniform(job, 3, r.transient ? attempt : 0));
}

bool FailureModel::RetrySucceeds(int64_t job, int attempt) const {
  return Uniform(job, 4, attempt) < options_.retry_success;
}

int FailureModel::PhillyTrials(int64_t job, int reason) const {
  const double mean = reasons_[reason].trials / reasons_[reason].jobs;
  const double whole = std::floor(mean);
  return static_cast<int>(whole) + (Uniform(job, 5, 0) < mean - whole ? 1 : 0);
}

}  // namespace gandiva::sched
