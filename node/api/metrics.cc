// See metrics.h.
#include "api/metrics.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace gandiva::controller {
namespace {

using protocol::Json;

// Label values escape \, " and newlines (the exposition format's rule).
std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// One metric family: its HELP and TYPE lines, then a sample per record.
struct Family {
  const char* name;
  const char* type;  // counter or gauge
  const char* help;
  // The sample of one record, or nullopt-like NaN to leave the record out.
  std::function<double(const Json&)> value;
};

void Render(std::string& out, const Family& f, const Json& records,
            const std::function<std::string(const Json&)>& labels) {
  out += std::string("# HELP ") + f.name + " " + f.help + "\n";
  out += std::string("# TYPE ") + f.name + " " + f.type + "\n";
  for (const Json& r : records) {
    const double v = f.value(r);
    if (std::isnan(v)) continue;
    out += std::string(f.name) + "{" + labels(r) + "} " + Number(v) + "\n";
  }
}

double Field(const Json& r, const char* name) {
  const Json& v = r[name];
  return v.is_null() ? NAN : v.get<double>();
}

bool Live(const Json& job) {
  const std::string s = job["state"].get<std::string>();
  return s != "exited" && s != "failed" && s != "migrated";
}

}  // namespace

std::string RenderMetrics(const std::string& node, const Json& jobs_reply,
                          const Json& devices_reply) {
  Json jobs = Json::array();
  for (const Json& j : jobs_reply["jobs"])
    if (Live(j)) jobs.push_back(j);
  const Json& devices = devices_reply["devices"];
  const std::string n = "node=\"" + Escape(node) + "\"";
  auto job_labels = [&](const Json& j) {
    std::string labels = n + ",job=\"" + std::to_string(j["id"].get<uint64_t>()) + "\",name=\"" +
                         Escape(j["name"].get<std::string>()) + "\",device=\"" +
                         Escape(j["device"].get<std::string>()) + "\"";
    // A job in a Kubernetes pod: its namespace, pod and container, as it said them.
    constexpr std::pair<const char*, const char*> kPodLabels[] = {
        {"pod_namespace", "namespace"}, {"pod", "pod"}, {"container", "container"}};
    for (const auto& [field, label] : kPodLabels)
      if (const std::string v = j.value(field, ""); !v.empty())
        labels += std::string(",") + label + "=\"" + Escape(v) + "\"";
    return labels;
  };
  auto device_labels = [&](const Json& d) {
    return n + ",device=\"" + Escape(d["name"].get<std::string>()) + "\"";
  };
  auto ms = [](const char* field) {
    return [field](const Json& r) { return Field(r, field) / 1000.0; };
  };
  auto plain = [](const char* field) { return [field](const Json& r) { return Field(r, field); }; };

  std::string out;
  const Family job_families[] = {
      {"gandiva_job_iterations_total", "counter", "Iterations the job completed.",
       plain("iterations")},
      {"gandiva_job_iteration_p50_seconds", "gauge", "Median iteration time (latest 1024).",
       ms("p50_ms")},
      {"gandiva_job_iteration_p99_seconds", "gauge", "99th percentile iteration time.",
       ms("p99_ms")},
      {"gandiva_job_iteration_ewma_seconds", "gauge", "Moving average of the iteration time.",
       ms("ewma_ms")},
      {"gandiva_job_iteration_alone_seconds", "gauge",
       "Iteration time alone on its device, once learned.", ms("alone_ms")},
      {"gandiva_job_rate_vs_alone", "gauge", "Throughput now against running alone.",
       plain("rate_vs_alone")},
      {"gandiva_job_device_seconds_total", "counter", "Seconds the job held its device.",
       plain("device_time_s")},
      {"gandiva_job_wall_seconds_total", "counter", "Seconds since the job started.",
       plain("wall_time_s")},
      {"gandiva_job_slices_total", "counter", "Time slices the job was given.", plain("slices")},
      {"gandiva_job_parks_total", "counter", "Times the job parked at a boundary.", plain("parks")},
      {"gandiva_job_swaps_total", "counter", "Times its device memory was swapped out.",
       plain("swaps")},
      {"gandiva_job_device_memory_bytes", "gauge", "Device memory the job holds.",
       plain("device_bytes")},
      {"gandiva_job_weight", "gauge", "The job's share of its device's slice.", plain("weight")},
      {"gandiva_job_no_boundaries", "gauge",
       "1 while the job has marked no iteration boundary a while after it registered "
       "(it runs unmanaged; see its boundary_warning).",
       [](const Json& j) -> double {
         const auto w = j.find("boundary_warning");
         return w != j.end() && w->is_string() && !w->get<std::string>().empty() ? 1 : 0;
       }},
      {"gandiva_job_last_migration_downtime_seconds", "gauge",
       "Downtime of the job's latest migration.",
       [](const Json& j) -> double {
         const Json& op = j["operation"];
         if (op.is_null() || op["kind"] != "migrate" || op["state"] != "done") return NAN;
         return op["downtime_ms"].get<double>() / 1000.0;
       }},
  };
  for (const Family& f : job_families) Render(out, f, jobs, job_labels);
  // The state as a label with value 1: one series per job.
  out += "# HELP gandiva_job_state The job's state (the series with value 1).\n";
  out += "# TYPE gandiva_job_state gauge\n";
  for (const Json& j : jobs)
    out += "gandiva_job_state{" + job_labels(j) + ",state=\"" +
           Escape(j["state"].get<std::string>()) + "\"} 1\n";

  const Family device_families[] = {
      {"gandiva_device_jobs", "gauge", "Live jobs placed on the device.",
       [](const Json& d) { return static_cast<double>(d["jobs"].size()); }},
      {"gandiva_device_running_jobs", "gauge", "Of those, running now.",
       [](const Json& d) { return static_cast<double>(d["running"].size()); }},
      {"gandiva_device_switches_total", "counter",
       "Hand-overs between jobs since gandivad started.", plain("switches")},
      {"gandiva_device_handover_mean_seconds", "gauge", "Mean hand-over time between jobs.",
       ms("mean_handover_ms")},
      {"gandiva_device_slice_seconds", "gauge", "The device's time slice.", ms("slice_ms")},
      {"gandiva_device_resident_bytes", "gauge", "Its jobs' memory on the device now.",
       plain("resident_bytes")},
      {"gandiva_device_packing", "gauge", "1 while its jobs may run at once (pack).",
       [](const Json& d) { return d["packing"].get<bool>() ? 1.0 : 0.0; }},
  };
  for (const Family& f : device_families) Render(out, f, devices, device_labels);
  return out;
}

}  // namespace gandiva::controller
