// Turns per-job records into the run's metrics, a table and JSON.
#include "gandiva/scheduler/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace gandiva::sched {
namespace {

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  size_t i = static_cast<size_t>(std::ceil(q * sorted.size())) - (q > 0 ? 1 : 0);
  return sorted[std::min(i, sorted.size() - 1)];
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

std::string Human(double seconds) {
  char buf[32];
  if (seconds >= 86400 * 10)
    std::snprintf(buf, sizeof buf, "%.1fd", seconds / 86400);
  else if (seconds >= 3600)
    std::snprintf(buf, sizeof buf, "%.2fh", seconds / 3600);
  else if (seconds >= 60)
    std::snprintf(buf, sizeof buf, "%.1fm", seconds / 60);
  else
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  return buf;
}

}  // namespace

namespace {

// Prediction error over every finished job that was predicted.
void SummarisePredictions(const std::vector<PredictionRecord>& records, Report* rep) {
  rep->predicted_jobs = static_cast<int64_t>(records.size());
  if (records.empty()) return;
  std::vector<double> abs_error, ratio;
  double sum_sq = 0;
  for (const auto& p : records) {
    double predicted = std::max(p.predicted, 1.0), actual = std::max(p.actual, 1.0);
    abs_error.push_back(std::abs(p.predicted - p.actual));
    ratio.push_back(std::max(predicted / actual, actual / predicted));
    double d = std::log(predicted) - std::log(actual);
    sum_sq += d * d;
  }
  std::sort(abs_error.begin(), abs_error.end());
  std::sort(ratio.begin(), ratio.end());
  rep->pred_median_abs_error = Quantile(abs_error, 0.5);
  rep->pred_median_ratio = Quantile(ratio, 0.5);
  rep->pred_rmsle = std::sqrt(sum_sq / static_cast<double>(records.size()));
}

}  // namespace

Report MakeReport(const std::string& policy, SimResult r) {
  Report rep;
  rep.policy = policy;
  std::vector<double> jct, queue, ftf;
  const char* labels[4] = {"1", "2-4", "5-8", ">8"};
  double size_sum[4] = {0, 0, 0, 0};
  int64_t size_n[4] = {0, 0, 0, 0};
  double first_submit = r.jobs.empty() ? 0 : r.jobs.front().submit, last_finish = 0;
  for (const JobRecord& j : r.jobs) {
    double t = j.finish - j.submit;
    jct.push_back(t);
    queue.push_back(j.first_start - j.submit);
    ftf.push_back(t / std::max(j.duration, 1.0));
    int c = j.num_gpus <= 1 ? 0 : j.num_gpus <= 4 ? 1 : j.num_gpus <= 8 ? 2 : 3;
    size_sum[c] += t;
    ++size_n[c];
    first_submit = std::min(first_submit, j.submit);
    last_finish = std::max(last_finish, j.finish);
  }
  rep.jobs = static_cast<int64_t>(jct.size());
  rep.avg_jct = Mean(jct);
  rep.avg_queue = Mean(queue);
  rep.ftf_mean = Mean(ftf);
  std::sort(jct.begin(), jct.end());
  std::sort(queue.begin(), queue.end());
  std::sort(ftf.begin(), ftf.end());
  rep.median_jct = Quantile(jct, 0.5);
  rep.p99_jct = Quantile(jct, 0.99);
  rep.p99_queue = Quantile(queue, 0.99);
  rep.ftf_p99 = Quantile(ftf, 0.99);
  rep.ftf_max = ftf.empty() ? 0 : ftf.back();
  rep.frac_ftf_over_2 =
      ftf.empty() ? 0
                  : static_cast<double>(ftf.end() - std::upper_bound(ftf.begin(), ftf.end(), 2.0)) /
                        ftf.size();
  rep.makespan = last_finish - first_submit;
  double cap = rep.makespan * r.total_gpus;
  rep.util_allocated = cap > 0 ? r.allocated_gpu_seconds / cap : 0;
  rep.util_effective = cap > 0 ? r.effective_gpu_seconds / cap : 0;
  double wcap = r.window_seconds * r.total_gpus;
  rep.window_allocated = wcap > 0 ? r.window_allocated_gpu_seconds / wcap : rep.util_allocated;
  rep.window_effective = wcap > 0 ? r.window_effective_gpu_seconds / wcap : rep.util_effective;
  for (int c = 0; c < 4; ++c)
    rep.by_size.push_back({labels[c], size_n[c], size_n[c] ? size_sum[c] / size_n[c] : 0});
  rep.preemptions = r.preemptions;
  rep.migrations = r.migrations;
  rep.resizes = r.resizes;
  rep.packs = r.policy.packs;
  rep.unpacks = r.policy.unpacks;
  rep.time_slices = r.policy.time_slices;
  SummarisePredictions(r.policy.predictions, &rep);
  rep.events = r.events;
  rep.result = std::move(r);
  return rep;
}

std::string ReportsToJson(const std::vector<Report>& reports, const std::string& trace_name,
                          const std::string& cluster_name, int cdf_points) {
  nlohmann::json doc;
  doc["trace"] = trace_name;
  doc["cluster"] = cluster_name;
  doc["runs"] = nlohmann::json::array();
  const Report* fifo = nullptr;
  for (const auto& r : reports)
    if (r.policy == "fifo") fifo = &r;
  for (const auto& r : reports) {
    nlohmann::json j;
    j["policy"] = r.policy;
    j["jobs"] = r.jobs;
    j["avg_jct_s"] = r.avg_jct;
    j["median_jct_s"] = r.median_jct;
    j["p99_jct_s"] = r.p99_jct;
    j["avg_queue_s"] = r.avg_queue;
    j["p99_queue_s"] = r.p99_queue;
    j["makespan_s"] = r.makespan;
    j["util_allocated"] = r.util_allocated;
    j["util_effective"] = r.util_effective;
    j["window_util_allocated"] = r.window_allocated;
    j["window_util_effective"] = r.window_effective;
    j["preemptions"] = r.preemptions;
    j["migrations"] = r.migrations;
    j["packs"] = r.packs;
    j["unpacks"] = r.unpacks;
    j["time_slices"] = r.time_slices;
    j["resizes"] = r.resizes;
    j["ftf_mean"] = r.ftf_mean;
    j["ftf_p99"] = r.ftf_p99;
    j["ftf_max"] = r.ftf_max;
    j["frac_ftf_over_2"] = r.frac_ftf_over_2;
    if (r.predicted_jobs > 0)
      j["prediction"] = {{"jobs", r.predicted_jobs},
                         {"median_abs_error_s", r.pred_median_abs_error},
                         {"median_ratio", r.pred_median_ratio},
                         {"rmsle", r.pred_rmsle}};
    j["events"] = r.events;
    j["sim_wall_s"] = r.sim_seconds;
    if (fifo && fifo->avg_jct > 0) j["avg_jct_vs_fifo"] = r.avg_jct / fifo->avg_jct;
    for (const auto& s : r.by_size)
      j["jct_by_size"][s.label] = {{"jobs", s.jobs}, {"avg_jct_s", s.avg_jct}};
    std::vector<double> jct;
    for (const auto& rec : r.result.jobs) jct.push_back(rec.finish - rec.submit);
    std::sort(jct.begin(), jct.end());
    nlohmann::json cdf = nlohmann::json::array();
    for (int i = 0; i <= cdf_points && !jct.empty(); ++i) {
      double q = static_cast<double>(i) / cdf_points;
      cdf.push_back({Quantile(jct, q), q});
    }
    j["jct_cdf"] = cdf;
    nlohmann::json util = nlohmann::json::array();
    for (const auto& u : r.result.util) util.push_back({u.time, u.allocated, u.effective});
    j["util_bucket_s"] = r.result.util_bucket_seconds;
    j["util"] = util;  // [time_s, allocated, effective]
    doc["runs"].push_back(std::move(j));
  }
  return doc.dump(1);
}

std::string FormatTable(const std::vector<Report>& reports) {
  const Report* fifo = nullptr;
  for (const auto& r : reports)
    if (r.policy == "fifo") fifo = &r;
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "%-14s %8s %9s %9s %9s %9s %9s %9s %6s %6s %6s %6s %8s %7s %7s %7s %6s\n", "policy",
                "jobs", "avg JCT", "median", "p99 JCT", "avg wait", "p99 wait", "makespan", "alloc",
                "effect", "wAlloc", "wEff", "preempt", "migr", "packs", "FTF", "vsFIFO");
  out += line;
  for (const auto& r : reports) {
    std::string ratio =
        fifo && fifo->avg_jct > 0 ? std::to_string(r.avg_jct / fifo->avg_jct).substr(0, 5) : "-";
    std::snprintf(line, sizeof line,
                  "%-14s %8lld %9s %9s %9s %9s %9s %9s %5.1f%% %5.1f%% %5.1f%% %5.1f%% %8lld %7lld "
                  "%7lld %7.2f %6s\n",
                  r.policy.c_str(), static_cast<long long>(r.jobs), Human(r.avg_jct).c_str(),
                  Human(r.median_jct).c_str(), Human(r.p99_jct).c_str(), Human(r.avg_queue).c_str(),
                  Human(r.p99_queue).c_str(), Human(r.makespan).c_str(), 100 * r.util_allocated,
                  100 * r.util_effective, 100 * r.window_allocated, 100 * r.window_effective,
                  static_cast<long long>(r.preemptions), static_cast<long long>(r.migrations),
                  static_cast<long long>(r.packs), r.ftf_mean, ratio.c_str());
    out += line;
  }
  out +=
      "(alloc/effect: GPU utilisation over the makespan; wAlloc/wEff: from first to last "
      "submission;\n"
      " FTF: mean finish-time fairness JCT/duration; vsFIFO: avg JCT / FIFO's)\n";
  out += "\navg JCT by job size (GPUs):\n";
  std::snprintf(line, sizeof line, "%-14s", "policy");
  out += line;
  if (!reports.empty())
    for (const auto& s : reports[0].by_size) {
      std::snprintf(line, sizeof line, " %9s",
                    (s.label + " (" + std::to_string(s.jobs) + ")").c_str());
      out += line;
    }
  out += "\n";
  for (const auto& r : reports) {
    std::snprintf(line, sizeof line, "%-14s", r.policy.c_str());
    out += line;
    for (const auto& s : r.by_size) {
      std::snprintf(line, sizeof line, " %9s", Human(s.avg_jct).c_str());
      out += line;
    }
    out += "\n";
  }
  bool any_prediction = false;
  for (const auto& r : reports) any_prediction |= r.predicted_jobs > 0;
  if (!any_prediction) return out;
  out += "\nduration prediction (each job's prediction at submission vs its run time):\n";
  std::snprintf(line, sizeof line, "%-14s %8s %12s %12s %8s %9s\n", "policy", "jobs", "med |err|",
                "med ratio", "RMSLE", "avg JCT");
  out += line;
  for (const auto& r : reports) {
    if (r.policy == "srtf") {  // the bound a perfect predictor points at
      std::snprintf(line, sizeof line, "%-14s %8lld %12s %12s %8s %9s\n", r.policy.c_str(),
                    static_cast<long long>(r.jobs), "0 (oracle)", "1.00x", "0",
                    Human(r.avg_jct).c_str());
      out += line;
    }
    if (r.predicted_jobs == 0) continue;
    std::snprintf(line, sizeof line, "%-14s %8lld %12s %11.2fx %8.3f %9s\n", r.policy.c_str(),
                  static_cast<long long>(r.predicted_jobs), Human(r.pred_median_abs_error).c_str(),
                  r.pred_median_ratio, r.pred_rmsle, Human(r.avg_jct).c_str());
    out += line;
  }
  return out;
}

}  // namespace gandiva::sched
