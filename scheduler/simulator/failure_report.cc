// The failure experiment's table (one row per variant, savings against the
// first) and JSON (every figure, the model's settings and reasons).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "gandiva/scheduler/failure_sim.h"

namespace gandiva::sched {
namespace {

std::string Duration(double s) {
  char buf[32];
  if (s < 120)
    std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 7200)
    std::snprintf(buf, sizeof buf, "%.1fm", s / 60);
  else
    std::snprintf(buf, sizeof buf, "%.1fh", s / 3600);
  return buf;
}

const char* ClassName(ExitClass c) {
  switch (c) {
    case ExitClass::kUser:
      return "user";
    case ExitClass::kInfra:
      return "infrastructure";
    case ExitClass::kPreempted:
      return "preempted";
  }
  return "?";
}

}  // namespace

std::string FormatFailureTable(const FailureReport& rep) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "%-9s %6s %6s %6s %6s %6s %6s %6s %6s %9s %8s %9s %9s %6s %7s %7s %7s %7s\n",
                "variant", "jobs", "fail1", "ok", "failed", "runs", "retry", "valid", "caught",
                "failGPUh", "valGPUh", "totGPUh", "savedGPUh", "saved", "rep p50", "rep p90",
                "okJCT", "okWait");
  out += line;
  const double base_waste = rep.runs.empty() ? 0 : rep.runs.front().wasted_gpu_hours();
  const double base = rep.runs.empty() ? 0 : rep.runs.front().total_gpu_hours;
  for (const auto& r : rep.runs) {
    const double saved = base_waste - r.wasted_gpu_hours();
    std::snprintf(line, sizeof line,
                  "%-9s %6lld %6lld %6lld %6lld %6lld %6lld %6lld %6lld %9.0f %8.0f %9.0f %9.0f "
                  "%5.2f%% %7s %7s %7s %7s\n",
                  r.variant.c_str(), static_cast<long long>(r.jobs),
                  static_cast<long long>(r.failing_jobs), static_cast<long long>(r.succeeded),
                  static_cast<long long>(r.failed), static_cast<long long>(r.attempts),
                  static_cast<long long>(r.retries), static_cast<long long>(r.validations),
                  static_cast<long long>(r.caught_in_validation), r.failed_gpu_hours,
                  r.validation_gpu_hours, r.total_gpu_hours, saved,
                  base > 0 ? 100 * saved / base : 0.0, Duration(r.report_p50).c_str(),
                  Duration(r.report_p90).c_str(), Duration(r.ok_jct_mean).c_str(),
                  Duration(r.ok_wait_mean).c_str());
    out += line;
  }
  out +=
      "(fail1: jobs the model fails at least once; ok/failed: jobs that finished / whose failure "
      "was reported;\n runs: full runs started; retry: tries after a failure; valid/caught: "
      "validation runs and failures inside them;\n failGPUh: GPU-hours of runs and validations "
      "that failed; totGPUh: all GPU-hours (runs, validations,\n co-runners' slice overhead); "
      "saved: the first row's GPU-hours not spent on finished work, less this row's,\n and as a "
      "share of the first row's total;\n rep p50/p90: submit to the "
      "user hearing of a failure; okJCT/okWait: mean JCT and wait of jobs that never fail)\n";
  return out;
}

std::string FailureReportToJson(const FailureReport& rep) {
  nlohmann::json j;
  j["trace"] = rep.trace;
  j["cluster"] = rep.cluster;
  j["load"] = rep.load;
  j["model"] = {{"seed", rep.model.seed},
                {"failing_share", rep.model.failing_share},
                {"retry_success", rep.model.retry_success}};
  const FailureSimConfig& c = rep.config;
  j["settings"] = {{"philly_max_trials", c.philly_max_trials},
                   {"retry_limit", c.retry_limit},
                   {"backoff_seconds", c.backoff_seconds},
                   {"max_backoff_seconds", c.max_backoff_seconds},
                   {"validate_iterations", c.validate_iterations},
                   {"validate_startup_seconds", c.validate_startup_seconds},
                   {"switch_seconds", c.switch_seconds},
                   {"clip_to_duration", c.clip_to_duration}};
  j["reasons"] = nlohmann::json::array();
  for (const auto& r : PhillyFailureReasons())
    j["reasons"].push_back({{"name", r.name},
                            {"category", r.category},
                            {"seen_as", ClassName(r.seen_as)},
                            {"transient", r.transient},
                            {"trials", r.trials},
                            {"jobs", r.jobs},
                            {"rtf_minutes_p50_p90_p95", {r.p50, r.p90, r.p95}},
                            {"rtf_share_percent", r.rtf_share}});
  const double base_waste = rep.runs.empty() ? 0 : rep.runs.front().wasted_gpu_hours();
  const double base = rep.runs.empty() ? 0 : rep.runs.front().total_gpu_hours;
  j["runs"] = nlohmann::json::array();
  for (const auto& r : rep.runs)
    j["runs"].push_back(
        {{"variant", r.variant},
         {"jobs", r.jobs},
         {"failing_jobs", r.failing_jobs},
         {"succeeded", r.succeeded},
         {"failed", r.failed},
         {"attempts", r.attempts},
         {"retries", r.retries},
         {"validations", r.validations},
         {"caught_in_validation", r.caught_in_validation},
         {"failed_gpu_hours", r.failed_gpu_hours},
         {"validation_gpu_hours", r.validation_gpu_hours},
         {"slice_overhead_gpu_hours", r.slice_overhead_gpu_hours},
         {"total_gpu_hours", r.total_gpu_hours},
         {"useful_gpu_hours", r.useful_gpu_hours},
         {"wasted_gpu_hours", r.wasted_gpu_hours()},
         {"saved_gpu_hours", base_waste - r.wasted_gpu_hours()},
         {"saved_share", base > 0 ? (base_waste - r.wasted_gpu_hours()) / base : 0.0},
         {"report_seconds_p50", r.report_p50},
         {"report_seconds_p90", r.report_p90},
         {"report_seconds_mean", r.report_mean},
         {"ok_jct_seconds_mean", r.ok_jct_mean},
         {"ok_wait_seconds_mean", r.ok_wait_mean},
         {"succeeded_jct_seconds_mean", r.succeeded_jct_mean},
         {"makespan_seconds", r.makespan},
         {"sim_seconds", r.sim_seconds}});
  return j.dump(2);
}

}  // namespace gandiva::sched
