// The fragmentation experiment's table (means over seeds, per policy) and JSON
// (every run).
#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "gandiva/scheduler/fractional_experiment.h"

namespace gandiva::sched {
namespace {

// Mean, min and max of one figure over a policy's runs.
struct Spread {
  double mean = 0, min = 0, max = 0;
};

template <typename Get>
Spread Over(const std::vector<const FractionalRun*>& runs, Get get) {
  Spread s{0, get(*runs[0]), get(*runs[0])};
  for (const auto* r : runs) {
    s.mean += get(*r);
    s.min = std::min(s.min, get(*r));
    s.max = std::max(s.max, get(*r));
  }
  s.mean /= static_cast<double>(runs.size());
  return s;
}

std::string Percent(const Spread& s, bool range) {
  char buf[64];
  if (range && s.max > s.min)
    std::snprintf(buf, sizeof buf, "%.1f%% (%.1f-%.1f)", 100 * s.mean, 100 * s.min, 100 * s.max);
  else
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * s.mean);
  return buf;
}

// The runs of each policy, in the order the policies were run.
std::vector<std::pair<std::string, std::vector<const FractionalRun*>>> ByPolicy(
    const FractionalReport& r) {
  std::vector<std::pair<std::string, std::vector<const FractionalRun*>>> out;
  for (const auto& run : r.runs) {
    if (out.empty() || out.back().first != run.policy) out.push_back({run.policy, {}});
    out.back().second.push_back(&run);
  }
  return out;
}

}  // namespace

std::string FormatFractionalTable(const FractionalReport& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "%d nodes, %.0f GPUs; %d trace tasks asking for %.1f GPUs; order %s, "
                "inflate x%.2g, FGD mix %s\n",
                r.nodes, r.capacity_gpus, r.trace_tasks, r.trace_demand_gpus, r.order.c_str(),
                r.inflate, r.mix.c_str());
  out += line;
  std::snprintf(line, sizeof line, "%-10s %4s %8s %7s %22s %9s %9s %8s %8s %8s %6s %7s\n", "policy",
                "runs", "placed", "failed", "alloc@1st-fail", "frag@1st", "unplaced", "alloc",
                "unalloc", "frag", "frag%", "s/run");
  out += line;
  for (const auto& [policy, runs] : ByPolicy(r)) {
    auto get = [&](auto f) { return Over(runs, f); };
    const Spread placed = get([](const FractionalRun& x) { return double(x.placed); });
    const Spread failed = get([](const FractionalRun& x) { return double(x.failed); });
    const Spread frag_first =
        get([](const FractionalRun& x) { return x.fragmented_gpus_at_first_failure; });
    const Spread first = get([](const FractionalRun& x) { return x.allocated_at_first_failure; });
    const Spread unplaced = get([](const FractionalRun& x) { return x.unplaced_demand; });
    const Spread alloc = get([](const FractionalRun& x) { return x.allocated_at_end; });
    const Spread unalloc = get([](const FractionalRun& x) { return x.unallocated_gpus; });
    const Spread frag = get([](const FractionalRun& x) { return x.fragmented_gpus; });
    const Spread secs = get([](const FractionalRun& x) { return x.seconds; });
    std::snprintf(line, sizeof line,
                  "%-10s %4zu %8.0f %7.1f %22s %9.1f %9s %8s %8.1f %8.1f %5.1f%% %7.2f\n",
                  policy.c_str(), runs.size(), placed.mean, failed.mean,
                  Percent(first, true).c_str(), frag_first.mean, Percent(unplaced, false).c_str(),
                  Percent(alloc, false).c_str(), unalloc.mean, frag.mean,
                  unalloc.mean > 0 ? 100 * frag.mean / unalloc.mean : 0.0, secs.mean);
    out += line;
  }
  out +=
      "(alloc@1st-fail: GPU capacity allocated when the first task could not be placed, mean "
      "(min-max) over seeds;\n frag@1st: GPUs fragmented then; unplaced: share of the arrived GPU "
      "demand never placed;\n alloc, unalloc, frag: at the end, allocated share, unallocated "
      "GPUs, and those fragmented;\n fragmented: free GPU capacity the trace's GPU tasks could "
      "not use where it is, expected over their mix)\n";
  return out;
}

std::string FractionalReportToJson(const FractionalReport& r) {
  nlohmann::json j;
  j["tasks"] = r.tasks_path;
  j["nodes"] = r.nodes_path;
  j["order"] = r.order;
  j["mix"] = r.mix;
  j["inflate"] = r.inflate;
  j["node_count"] = r.nodes;
  j["trace_tasks"] = r.trace_tasks;
  j["capacity_gpus"] = r.capacity_gpus;
  j["trace_demand_gpus"] = r.trace_demand_gpus;
  j["runs"] = nlohmann::json::array();
  for (const auto& x : r.runs) {
    j["runs"].push_back({{"policy", x.policy},
                         {"seed", x.seed},
                         {"tasks", x.tasks},
                         {"placed", x.placed},
                         {"failed", x.failed},
                         {"first_failure", x.first_failure},
                         {"arrived_at_first_failure", x.arrived_at_first_failure},
                         {"allocated_at_first_failure", x.allocated_at_first_failure},
                         {"fragmented_gpus_at_first_failure", x.fragmented_gpus_at_first_failure},
                         {"first_failed_num_gpu", x.first_failed_num_gpu},
                         {"first_failed_gpu_milli", x.first_failed_gpu_milli},
                         {"unplaced_demand", x.unplaced_demand},
                         {"allocated_at_end", x.allocated_at_end},
                         {"unallocated_gpus", x.unallocated_gpus},
                         {"fragmented_gpus", x.fragmented_gpus},
                         {"seconds", x.seconds}});
  }
  return j.dump(2);
}

}  // namespace gandiva::sched
